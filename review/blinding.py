"""Blinding: what a clinician sees of a response must not tell them which model wrote it.

Two leaks are closed here and in the selectors that use it:
- identifiers: responses are addressed by per-review random handles, never by database ids
  (which follow import order), and shown in an order drawn by a CSPRNG when the review opens
  (``review.services.reviews``);
- the text itself: every response is masked when it is rendered, whatever the importer thought
  of it: words that name a model, a model family with its version, or the company that made it
  become ``[model name]``.

Matching runs on a normalised copy of the text (NFKC, every dash one ``-``, every space one
space, invisible format characters dropped), so ``GPT‑4`` (U+2011), ``ＧＰＴ－４`` (full width) and
``GPT 4`` are all the same ``gpt-4``; a match is mapped back to the original characters, so the
rest of the text reaches the clinician exactly as written. Separators between a family word and
its version are optional (``Mixtral 8x7B``, ``mixtral-8x7b``, ``Llama2``).

Some family words are also ordinary words: "phi" (a Greek letter; PHI is protected health
information), "falcon", "gemini", "palm", "mistral", "orca", "dolly", "bloom", "claude", "meta",
"google". Those are masked only with a version ("Phi-3", "Gemini 1.5 Pro"), in a self-reference
("I am Gemini", "As Claude", "trained by Google") or beside a word that makes them a model or a
maker ("Meta AI", "Google DeepMind"). ``names_a_model`` is the same test, used to list hits for
an admin to confirm (the Django admin, ``manage.py mask_check``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

MASK = "[model name]"

# Model families whose name is not an ordinary word: masked alone or with a version.
_PLAIN_FAMILIES = (
    r"chat\s?gpt",
    r"(?:bio|med|clinical|pubmed)gpt",
    r"gpt[\s\-_.]?(?:j|neox?)",
    r"openai",
    r"anthropic",
    r"deep\s?mind",
    r"deep\s?seek(?:[\s\-]?(?:coder|math|r\d|v\d))?",
    r"qwen\d*",
    r"mixtral",
    r"gemma\d*",
    r"llama\d*",
    r"code\s?llama",
    r"pmc[\s\-_]?llama",
    r"vicuna",
    r"med[\s\-_]?palm",
    r"med[\s\-_]?alpaca",
    r"meditron",
    r"clinical[\s\-_]?camel",
    r"chat[\s\-_]?doctor",
    r"open[\s\-_]?bio[\s\-_]?llm",
    r"biomistral",
    r"stable[\s\-_]?lm",
    r"starcoder",
    r"zephyr[\s\-_]?\d+b",
    r"olmo",
    r"internlm\d*",
    r"baichuan\d*",
    r"chatglm\d*",
    r"mosaic\s?ml",
    r"databricks",
    r"hugging\s?face",
    r"lmsys",
    r"ai21",
    r"nvidia",
    r"grok",
    r"copilot",
)

# Families that are also ordinary words (or, for "GPT", the old name of ALT): masked only with
# a version, in a self-reference or beside a word that makes them a model. ``PaLM`` is matched
# by its mixed case alone.
_WORD_FAMILIES = (
    r"gpt",
    r"phi",
    r"falcon",
    r"gemini",
    r"mistral",
    r"mpt",
    r"claude",
    r"bard",
    r"orca",
    r"dolly",
    r"bloomz?",
    r"alpaca",
    r"koala",
    r"yi",
    r"command[\s\-]?r\+?",
    r"ernie",
    r"titan",
    r"jamba",
    r"granite",
    r"nemotron",
)

# Makers that are also words or common names: masked in a maker's context only.
_MAKERS = (
    r"google",
    r"meta",
    r"microsoft",
    r"amazon",
    r"alibaba",
    r"mistral",
    r"cohere",
    r"stability",
    r"tii",
    r"x\.?ai",
    r"ibm",
    r"baidu",
    r"tencent",
)

# A version token after a family word: digits first ("4", "3.5", "8x7b", "70b", "4o"; not a lab
# value with its unit: "GPT 45 U/L" is the old name of ALT), "v2", a hyphen-joined tag
# ("-turbo", "-instruct", "-it"), or a tier after a space ("Gemini Pro", "Claude 3 Opus").
_TIERS = (
    r"pro|ultra|nano|flash|mini|turbo|opus|sonnet|haiku|instruct|chat|large|medium|small|"
    r"plus|max|preview|vision|coder|base|lite|air|omni|next"
)
_NUMERIC = (
    r"(?:[\s\-_.]?v?\d+(?:\.\d+)*(?:x\d+)?[a-z]{0,2}\d*"
    r"(?![\d.]*\s?(?:u/l|iu\b|mg\b|mmol|%)))"
)
_TAGGED = rf"(?:[\-_](?:{_TIERS}|instant|it|hf|sft|dpo|math|latest|[a-z]*\d[a-z0-9.]*)(?![a-z]))"
_TIER = rf"(?:\s(?:{_TIERS})\b)"
_SUFFIX = rf"(?:{_NUMERIC}|{_TAGGED}|{_TIER})"

# A model speaking of itself: "I am Gemini", "I'm Claude 3", "my name is Falcon". "As X" only
# where X ends the clause ("As Claude, I…"): "as phi increases" is trigonometry.
_SELF = r"(?:\bi\s?am|\bi'm|\bmy\s+name\s+is|\bthis\s+is|\bcalled|\bnamed)\s+(?:an?\s+|the\s+)?"
_AS = r"\bas\s+(?:an?\s+|the\s+)?"
_CLAUSE_END = r"(?=\s*(?:[,.;:!)]|\bi\b|$))"
# A maker named as one: "trained by Google", "from Meta".
_BY = (
    r"(?:\b(?:developed|trained|built|created|made|designed|released|produced|fine-?tuned|"
    r"powered|provided|hosted|served|owned)\s+(?:\w+\s+)?(?:by|at|from)|\bby)\s+"
)
# After a name: a word that makes it a model or a maker ("Gemini, an AI model", "Meta AI").
_AFTER = (
    r"(?=(?:'s)?,?\s+(?:an?\s+|the\s+)?(?:ai|a\.i\.|llm|language\s+model|large\s+language|"
    r"model|assistant|chatbot|deepmind|research|brain|cloud|platforms|labs?)\b)"
)


def _is_distinctive(tokens: list[str]) -> bool:
    # "mixtral-8x7b" or "SecretModel-Alpha" cannot be an ordinary word; "baseline" can.
    return len(tokens) > 1 or any(ch.isdigit() for ch in tokens[0])


def _name_alternatives(model_names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Patterns for the models of a response set, separators optional between their parts:
    ``mixtral-8x7b`` matches "Mixtral 8x7B"; ``SecretModel-Alpha-70B`` also matches its stem
    "SecretModel Alpha". A generated response's name is "<model>@<context length>". Returns
    (distinctive names, names that are single ordinary-looking words)."""
    plain: set[str] = set()
    words: set[str] = set()
    for raw in model_names:
        name = raw.rsplit("@", 1)[0].split("/")[-1].strip()
        tokens = [t for t in re.split(r"[\s\-_.:]+", _normalise(name)[0].lower()) if t]
        if not tokens or len("".join(tokens)) < 3:
            continue
        pattern = r"[\s\-_.]?".join(re.escape(t) for t in tokens)
        (plain if _is_distinctive(tokens) else words).add(pattern)
        stem: list[str] = []
        for token in tokens:
            if token[0].isdigit():
                break
            stem.append(token)
        if 0 < len(stem) < len(tokens) and len("".join(stem)) >= 6:
            pattern = r"[\s\-_.]?".join(re.escape(t) for t in stem)
            (plain if _is_distinctive(stem) else words).add(pattern)
    return (
        tuple(sorted(plain, key=len, reverse=True)),
        tuple(sorted(words, key=len, reverse=True)),
    )


@lru_cache(maxsize=256)
def _compiled(model_names: tuple[str, ...]) -> re.Pattern[str]:
    names, name_words = _name_alternatives(model_names)
    plain = "|".join(names + _PLAIN_FAMILIES)
    word = "|".join(name_words + _WORD_FAMILIES)
    makers = "|".join(_MAKERS)
    pattern = (
        rf"(?<![\w])(?P<plain>(?:{plain}){_SUFFIX}*)(?![\w])"
        rf"|(?<![\w])(?P<palm>(?-i:PaLM){_SUFFIX}*)(?![\w])"
        rf"|(?<![\w])(?P<versioned>(?:{word}){_SUFFIX}+)(?![\w])"
        rf"|{_SELF}(?P<self>(?:{word}|{makers}){_SUFFIX}*)(?![\w-])"
        rf"|{_AS}(?P<as>(?:{word}){_SUFFIX}*){_CLAUSE_END}"
        rf"|{_BY}(?P<by>{makers})(?![\w-])"
        rf"|(?<![\w])(?P<described>(?:{word}|{makers}){_SUFFIX}*){_AFTER}"
    )
    return re.compile(pattern, re.IGNORECASE)


_GROUPS = ("plain", "palm", "versioned", "self", "as", "by", "described")


def _normalise(text: str) -> tuple[str, list[int]]:
    """``text`` normalised for matching, and for each character of it the index of the
    original character it came from."""
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            out.append(" " if ch in "\t\n\r\f\v" else ch)
            index.append(i)
            continue
        for c in unicodedata.normalize("NFKC", ch):
            category = unicodedata.category(c)
            if category == "Cf":  # zero-width spaces and joiners, soft hyphens, BOM
                continue
            if category == "Pd" or c == "\u2212":
                c = "-"
            elif c.isspace():
                c = " "
            elif c in "\u2018\u2019\u02bc":
                c = "'"
            out.append(c)
            index.append(i)
    return "".join(out), index


def model_name_spans(text: str, model_names: Iterable[str] = ()) -> list[tuple[int, int]]:
    """Spans of ``text`` (original indexes, end exclusive) that name a model or its maker."""
    if not text:
        return []
    normalised, index = _normalise(text)
    pattern = _compiled(tuple(sorted({n for n in model_names if n})))
    spans: list[tuple[int, int]] = []
    for match in pattern.finditer(normalised):
        group = next(g for g in _GROUPS if match.group(g) is not None)
        start, end = match.span(group)
        if end > start:
            spans.append((index[start], index[end - 1] + 1))
    return spans


def mask_model_names(text: str, model_names: Iterable[str] | str = ()) -> str:
    """``text`` with every mention of a model, a model family or a maker masked."""
    names = (model_names,) if isinstance(model_names, str) else tuple(model_names)
    return _mask(text, names)


# The review page masks every response on every view: the same few texts, again and again.
@lru_cache(maxsize=4096)
def _mask(text: str, names: tuple[str, ...]) -> str:
    spans = model_name_spans(text, names)
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, end in spans:
        parts.append(text[last:start])
        parts.append(MASK)
        last = end
    parts.append(text[last:])
    return "".join(parts)


def model_name_hits(text: str, model_names: Iterable[str] | str = ()) -> list[str]:
    """The words that would be masked, as written: what an admin confirms."""
    names = (model_names,) if isinstance(model_names, str) else tuple(model_names)
    return [text[s:e] for s, e in model_name_spans(text, names)]


def names_a_model(text: str, model_names: Iterable[str] | str = ()) -> bool:
    """Whether masking would change ``text``: a heuristic hit for an admin to confirm."""
    names = (model_names,) if isinstance(model_names, str) else tuple(model_names)
    return bool(model_name_spans(text, names))
