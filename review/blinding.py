"""Blinding: what a clinician sees of a response must not tell them which model wrote it.

Two leaks are closed here and in the selectors that use it:
- identifiers: responses are addressed by per-review random handles, never by database ids
  (which follow import order), and shown in an order drawn by a CSPRNG when the review opens
  (``review.services.reviews``);
- the text itself: every response is masked when it is rendered, whatever the importer thought
  of it: words that name a model, a model family with its version, or the company that made it
  become ``[model name]``.

Matching runs on a folded ASCII copy of the text, and a match is mapped back to the original
characters, so the rest of the text reaches the clinician exactly as written. Folding: NFKD
(full width ``ＧＰＴ`` is ``GPT``), accents and other combining marks and invisible format
characters dropped (``G\\u200bPT``, ``Clàude``), every dash one ``-``, every run of spaces one
space (a line break if it has one), every other non-ASCII character its Unicode TR39 confusable
skeleton (ICU's ``SpoofChecker``: the Cyrillic ``С`` and ``а`` of ``Сhаt``), or, where the
skeleton is not ASCII (or is several characters: a ligature, "™"), a placeholder that is part
of a word, or not, but of no name. One character for one through ``str.translate``; the drops
and the runs of spaces with numpy: no Python loop over the text.

Everything that reads the text is RE2 (``review.linear``): linear in the text, whatever it is.
RE2 has no lookaround, so each rule is one pattern that takes in its context ("I am", "As",
"trained by", ", an AI model"), plus checks where a match ends (", I" after "As Claude", the
end of the clause after "I am Atlas", a lab unit after a version, a hyphen after a maker), each
a few bytes. Every pattern bounds what one match of a name may consume (a version has at most
``_MAX_ITEMS`` parts of bounded length).

What is masked:
- names masked wherever they stand, with any version after them: the families and makers below
  whose name is no ordinary word ("ChatGPT", "Chat-GPT", "Open AI", "Mixtral 8x7B", "Llama2",
  and letter by letter: "C h a t G P T", "O p e n A I"), and the distinctive parts of the set's
  own model names. A part is distinctive when it has a digit and two letters ("Med42", "Med
  42", "M e d 4 2"), or is not an English or clinical word (``review.lexicon``: "Meditron",
  "SecretModel", "MedLM"); a name's stem before its version ("SecretModel Alpha"), an ordinary
  word with the size that follows it in the name ("Aloe-8B") and the name whole ("Atlas 13B")
  are names too;
- families that are also ordinary words ("phi", "falcon", "gemini", "GPT" the old name of ALT,
  "claude", "orca"): with a version ("Phi-3", "Gemini 1.5 Pro", "G P T - 4"), in a
  self-reference of which the name is a whole clause ("I am Gemini.", "As Claude, I", "Regards,
  Claude" ending the line) or beside a word that makes them a model ("Gemini, an AI model").
  ``PaLM`` by its mixed case alone;
- every other word of the set's model names, however short ("Atlas", "Cedar", "Aloe" of
  ``Llama3-Aloe-8B``): in the same self-references ("I'm Cedar and I…", "I, Atlas, suggest",
  "Hi, this is Cedar." capitalised) or beside "AI", "assistant" and the like; never "This is
  alpha thalassemia", "I am the health visitor", "As atlas dislocation goes". The ordinary words
  of a hub id's owner ("health" of ``m42-health``) are no name: a model does not call itself so;
- makers that are words or common names ("Google", "Meta"): in a self-reference, after "by"
  ("trained by Google") or beside a word that makes them a maker ("Meta AI").

- names of models outside the set: the medical and common families above ("MedGemma",
  "Med42", "WizardLM", "o3-mini"; "Meerkat", "Hermes", "GLM" only as the words families are),
  and "Sonnet", "Opus", "Haiku", "o1" in a self-reference or after "Claude"/"Anthropic"; and
  any name a self-introduction gives ("I'm Zorblax.", "As Vantrix, I", "Regards, Parvix")
  that is no English or clinical word. One that is ("I am Sorry.") is left as written and
  listed as a near miss;
- the set's names in headers and attributions: "Model: Atlas", "model=Fjord", "Response from
  Atlas:", "The Atlas model", "Atlas (AI)", "Atlas here.", "[Beacon]" opening a line, "AI
  assistant Atlas", "Cedar answer:"; a word of a name letter by letter ("A t l a s"), with a
  training tag ("Fjord-Instruct", "FjordInstruct"), or with its size spaced or cut short
  ("Atlas 70 B", "Beacon-13" of Beacon-13B).

``names_a_model`` is the same test, used to list hits for an admin to confirm (the Django admin,
``manage.py mask_check``), and ``near_misses`` lists what was left as written but looks like a
name: a name's word outside a self-reference, an ordinary word a self-introduction gives as a
name, or a word one edit from a name.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import icu
import numpy as np
import numpy.typing as npt

from review import lexicon, linear

MASK = "[model name]"

# A version has at most this many parts ("-2", "-70b", "-chat", "-hf"): what bounds one match.
_MAX_ITEMS = 8


def _spelled(letters: str) -> str:
    """An acronym written whole or letter by letter with one kind of separator: "GPT",
    "G P T", "G-P-T", "G.P.T". (Mixed separators are not a way anyone writes it; "g pt" is
    grams and a patient.)"""
    return "(?:" + "|".join([letters, *(sep.join(letters) for sep in (r"\s", "-", r"\."))]) + ")"


def _letters_apart(word: str) -> str:
    """A name written letter by letter with one kind of separator: "C h a t G P T", "O-p-e-n-A-I".
    Nobody writes a clinical word so."""
    return "(?:" + "|".join(sep.join(word) for sep in (r"\s", "-", r"\.")) + ")"


_SEP = r"[\s\-.]?"  # between the parts of a name; underscores fold to hyphens
_GPT = _spelled("gpt")
# Products and families also masked spelled out letter by letter (with or without a version).
_SPELLED_OUT = (
    "chatgpt",
    "openai",
    "anthropic",
    "deepmind",
    "deepseek",
    "mixtral",
    "meditron",
    "llama",
    "gemma",
    "gemini",
    "claude",
    "mistral",
    "vicuna",
    "qwen",
    "falcon",
    "med42",
)

# Model families whose name is not an ordinary word: masked alone or with a version.
_PLAIN_FAMILIES = (
    rf"chat{_SEP}{_GPT}",
    rf"(?:bio|med|clinical|pubmed)-?{_GPT}",
    rf"{_GPT}{_SEP}(?:j|neox?)",
    r"open[\s\-.]?(?:ai|a\.i)",
    r"anthropic",
    rf"deep{_SEP}mind",
    rf"deep{_SEP}seek(?:[\s\-]?(?:coder|math|r\d|v\d))?",
    r"qwen\d{0,3}",
    r"mixtral",
    r"gemma\d{0,3}",
    r"llama\d{0,3}",
    rf"code{_SEP}llama",
    rf"pmc{_SEP}llama",
    r"vicuna",
    rf"med{_SEP}palm",
    rf"med{_SEP}alpaca",
    r"meditron",
    rf"clinical{_SEP}camel",
    rf"chat{_SEP}doctor",
    rf"open{_SEP}bio{_SEP}llm",
    rf"bio{_SEP}mistral",
    rf"stable{_SEP}lm",
    rf"star{_SEP}coder",
    rf"zephyr{_SEP}\d{{1,3}}b",
    r"olmo",
    rf"intern{_SEP}lm\d{{0,3}}",
    r"baichuan\d{0,3}",
    rf"chat{_SEP}glm\d{{0,3}}",
    rf"mosaic{_SEP}ml",
    rf"data{_SEP}bricks",
    rf"hugging{_SEP}face",
    r"lmsys",
    r"ai21",
    r"nvidia",
    r"grok",
    r"copilot",
    # Medical and other fine-tunes, which often name their base model.
    rf"med{_SEP}42",
    rf"med{_SEP}gemma\d{{0,3}}",
    rf"med{_SEP}gemini",
    rf"bio{_SEP}med{_SEP}lm",
    rf"huatuo(?:{_SEP}{_GPT})?",
    rf"doctor{_SEP}glm",
    rf"wizard{_SEP}(?:lm|coder|math)",
    rf"open{_SEP}bio(?:{_SEP}llm)?",
    rf"nous{_SEP}(?:hermes|research)",
    rf"palmyra{_SEP}med",
    rf"flan{_SEP}(?:t5|palm|ul2)",
    r"galactica",
    r"llava",
    # OpenAI's reasoning models with a tier ("o3-mini"): "O2" is oxygen, never one of them.
    r"o[134]-(?:mini|preview|pro)",
    *(_letters_apart(word) for word in _SPELLED_OUT),
)

# Families that are also ordinary words (or, for "GPT", the old name of ALT): masked only with
# a version, in a self-reference or beside a word that makes them a model.
_WORD_FAMILIES = (
    _GPT,
    r"phi",
    r"falcon",
    r"gemini",
    r"mistral",
    _spelled("mpt"),
    r"claude",
    r"bard",
    r"orca",
    r"dolly",
    r"bloomz?",
    r"alpaca",
    r"koala",
    r"yi",
    r"command[\s\-]?r",
    r"ernie",
    r"titan",
    r"jamba",
    r"granite",
    r"nemotron",
    r"glm",  # also a generalized linear model
    r"kimi",
    r"amie",
    r"palmyra",
    r"asclepius",
    r"meerkat",
    r"tulu",
    r"hermes",
    r"zephyr",
    r"starling",
    r"guanaco",
    r"pythia",
)

# Names that are ordinary words with no version of their own ("Sonnet", "Haiku", OpenAI's
# "o1"): masked in a self-reference only ("I'm Sonnet.", "As o1, I"), and after "Claude" or
# "Anthropic" ("Anthropic's Sonnet").
_SELF_ONLY = (r"sonnet", r"opus", r"haiku", r"o[134]")

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

# A version after a family word: digits first ("4", "3.5", "8x7b", "70b", "4o"; not a lab value
# with its unit: "GPT 45 U/L" is the old name of ALT, checked after the match), "v2", a
# hyphen-joined tag ("-turbo", "-instruct", "-it"), or a tier after a space ("Gemini Pro",
# "Claude 3 Opus"). Every part ends on a letter or digit, so ``\b`` ends a match.
_TIERS = (
    r"pro|ultra|nano|flash|mini|turbo|opus|sonnet|haiku|instruct|chat|large|medium|small|"
    r"plus|max|preview|vision|coder|base|lite|air|omni|next"
)
_VSEP = r"(?:\s?[\-.]\s?|\s)?"  # "GPT-4", "GPT 4", "GPT - 4", "GPT4"
_NUMERIC = rf"(?:{_VSEP}v?\d{{1,4}}(?:\.\d{{1,4}}){{0,3}}(?:x\d{{1,3}})?[a-z]{{0,2}}\d{{0,3}})"
_TAGGED = (
    rf"(?:-(?:{_TIERS}|instant|it|hf|sft|dpo|math|latest|"
    r"[a-z]{0,8}\d[a-z0-9]{0,12}(?:\.[a-z0-9]{1,12}){0,3}))"
)
_TIER = rf"(?:\s(?:{_TIERS}))"
_SUFFIX = rf"(?:{_NUMERIC}|{_TAGGED}|{_TIER})"
_CHAIN = rf"{_SUFFIX}{{0,{_MAX_ITEMS}}}"
_VERSIONS = rf"{_SUFFIX}{{1,{_MAX_ITEMS}}}"

# The words before a name that make it a self-reference: "I am Gemini", "I'm Claude 3", "my
# name is Falcon", "call me Atlas", "I, Atlas, ...". A rule's pattern starts with one; the name
# begins where it ends. A word a model name shares with English ("Atlas", "Cedar", "Gemini")
# is one only when it is the whole clause (``_SELF_END``): "I am the health visitor", "I am
# cedar-allergic" are not. "This is" introduces a name only capitalised and a whole clause
# ("Hi, this is Cedar."): "This is alpha thalassemia", "This is baseline." are clinical.
_SELF = r"(?:i\s?am|i'm|my\sname\sis|call\sme|i,)\s(?:an?\s|the\s)?"
_THIS_IS = r"this\sis\s"
_SELF_NAMED = (
    r"(?:called|named)\s(?:an?\s|the\s)?"  # families and makers only: "a cream called Aloe"
)
_AS = r"as\s(?:an?\s|the\s)?"
_SIGN_OFF = (
    r"(?:(?:best|kind|warm|warmest)\s)?(?:regards|wishes)|best|sincerely|cheers|thanks|"
    r"thank\syou|yours(?:\s(?:truly|sincerely|faithfully))?|signed|warmly|respectfully"
)
# "Regards, Atlas", "Thanks,\nCedar", a dash signature "-- Claude" on a line of its own.
_SIGN_OFF_BEFORE = rf"(?:\b(?:{_SIGN_OFF})(?:[,:]\s?|\s?-\s?|\n)|(?:^|\n)\s?--?\s?)"
# A maker named as one: "trained by Google", "from Meta".
_BY = (
    r"(?:(?:developed|trained|built|created|made|designed|released|produced|fine-?tuned|"
    r"powered|provided|hosted|served|owned)\s(?:[a-z0-9]{1,24}\s)?(?:by|at|from)|by)\s"
)
# After a name: what makes it a model or a maker ("Gemini, an AI model", "Meta AI").
_AFTER_MODEL = r"ai|a\.i|llm|language\smodel|large\slanguage|assistant|chatbot"
_AFTER_MAKER = r"model|deepmind|research|brain|cloud|platforms|labs?"
# "Atlas (AI)", "Cedar (LLM)": a bracketed word that makes a name a model.
_AFTER_BRACKET = r"\s?\((?:ai|a\.i\.?|llm|model|bot|chatbot|assistant)\)"
_AFTER = rf"(?:(?:'s)?,?\s(?:an?\s|the\s)?(?:{_AFTER_MODEL}|{_AFTER_MAKER})\b|{_AFTER_BRACKET})"
_AFTER_NAME = rf"(?:(?:'s)?,?\s(?:an?\s|the\s)?(?:{_AFTER_MODEL})\b|{_AFTER_BRACKET})"
# Headers and attributions that say a name is a model's: "Model: Atlas", "Model name: Beacon",
# "model=Fjord", "Response from Atlas:", "AI assistant Atlas says", "[Beacon] The answer" at
# the start of a line; and after a name: "Claude here.", "The Atlas model", "Cedar answer:".
_HEADER = r"\bmodel(?:[\s\-]?name)?\s?[:=]\s?"
_FROM = r"\b(?:response|answer|reply|output|message|text)\s(?:from|by)\s(?:the\s)?"
_ASSISTANT = r"\b(?:ai\s)?(?:assistant|chatbot|bot|model|llm)\s"
_BRACKET = r"(?:^|\n)\s?\["
_THE = r"\bthe\s"
_THE_AFTER = r"\s(?:model|llm|ai|assistant|chatbot|bot)\b"
_HERE_AFTER = r"\shere\b"
_SAYS_AFTER = r"(?:'s)?\s(?:answer|response|reply|output)\s?:"
# Where a name after "I am" ends its clause: punctuation, the end of a line, "and I", a dash.
_SELF_END = r"(?:\s?[,.;:!?)]|\s?(?:\n|$)|\s(?:and\s|but\s|so\s)?i\b|\s--?\s)"
# "As X" only where the speaker follows ("As Claude, I…", "As Atlas, my advice"): "as phi
# increases" is trigonometry, "As atlas dislocation goes" anatomy.
_AS_END = r"(?:\s?,)?\s(?:i|my)\b"
# A sign-off's name ends the sentence, the line or the response ("Regards, Atlas."): "Thanks,
# Cedar Clinic staff", "Thanks, Cedar, for the referral" and "Regards, the health team" name
# no model.
_LINE_END = r"(?:\s?[.!]|\s?(?:\n|$))"
# A lab value, not a version: "GPT 45 U/L", "SGPT 120 IU".
_UNITS = r"[\d.]{0,20}\s?(?:u/l|iu\b|mg\b|mmol|%)"

# Parts of model names that say nothing of which model: sizes, versions, formats, tiers.
_GENERIC = frozenset(
    (
        _TIERS.replace("|", " ")
        + " instant it hf sft dpo rlhf math latest model models llm llms lm ai ml gguf ggml awq "
        "gptq exl2 int4 int8 fp16 bf16 fp8 fp32 release version new final test demo"
    ).split()
)
_VERSIONISH = linear.BytesPattern(rb"v?\d+(?:\.\d+)*(?:x\d+)?[a-z]{0,2}\d*")
_BUILTIN = linear.BytesPattern(
    ("(?i)(?:" + "|".join(_PLAIN_FAMILIES + _WORD_FAMILIES + _MAKERS) + ")").encode()
)
# A family with its version, as the built-in rules mask it anywhere ("gpt-4", "GPT-4o",
# "vicuna-13b-v1.5"): a set's name written so adds no pattern of its own.
_BUILTIN_VERSIONED = linear.BytesPattern(
    ("(?i)(?:" + "|".join(_PLAIN_FAMILIES + _WORD_FAMILIES) + f"){_CHAIN}").encode()
)


def _pattern(text: str) -> linear.BytesPattern:
    return linear.BytesPattern(text.encode("ascii"))


def _alternatives(patterns: Iterable[str]) -> str:
    # An alternation that matches nothing when empty (no name of that kind in the set), in
    # bytes and in UTF-8 alike (``heads_pattern`` is also compiled over str).
    joined = "|".join(patterns)
    return f"(?:{joined})" if joined else r"(?:\b\B)"


# Checks after a match (anchored where it ends) and the prefixes a context match starts with.
_PREFIX_SELF = _pattern(rf"(?i)\b{_SELF}")
_PREFIX_THIS_IS = _pattern(rf"(?i)\b{_THIS_IS}")
_PREFIX_SELF_NAMED = _pattern(rf"(?i)\b{_SELF_NAMED}")
_PREFIX_AS = _pattern(rf"(?i)\b{_AS}")
_PREFIX_SIGN_OFF = _pattern(rf"(?i){_SIGN_OFF_BEFORE}")
_PREFIX_BY = _pattern(rf"(?i)\b{_BY}")
_AFTER_SELF = _pattern(rf"(?i){_SELF_END}")
_AFTER_AS = _pattern(rf"(?i){_AS_END}")
_AFTER_LINE = _pattern(rf"(?i){_LINE_END}")
_AFTER_UNITS = _pattern(rf"(?i){_UNITS}")
_PREFIX_HEADER = _pattern(rf"(?i){_HEADER}")
_PREFIX_FROM = _pattern(rf"(?i){_FROM}")
_PREFIX_ASSISTANT = _pattern(rf"(?i){_ASSISTANT}")
_PREFIX_BRACKET = _pattern(rf"(?i){_BRACKET}")
_PREFIX_THE = _pattern(rf"(?i){_THE}")

# A name no list knows, as a self-introduction gives it ("I'm Zorblax.", "As Vantrix, I",
# "Regards, Parvix-2"): a capitalised word, or a word with a digit ("o1"), its hyphenated parts,
# up to two more capitalised words ("Nous Hermes") and a version. A name's digits are few: a
# run of them is no name ("As gpt11111111111111111abc, I" stays as written). Whether it is a
# name or an ordinary word ("I am Sorry.") is decided after the match (``_introduced``).
_INTRODUCED = (
    r"(?:(?-i:[A-Z])[A-Za-z]{0,39}|[a-z]{1,20}[0-9]{1,4}[a-z]{0,4})"
    r"(?:[0-9]{1,4}[A-Za-z]{0,4}){0,2}"
    r"(?:-[A-Za-z0-9]{1,20}){0,4}(?:\s(?-i:[A-Z])[A-Za-z0-9]{1,39}){0,2}"
    rf"{_CHAIN}"
)

# ---------------------------------------------------------------------------------------------
# Folding

_WORD_BYTES = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_IN_WORD = "_"  # a letter or digit with no ASCII skeleton (Greek λ, CJK): in a word, in no name
_NOT_WORD = "\x7f"  # any other character with no ASCII skeleton, and control characters
_QUOTES = frozenset("\u2018\u2019\u201b\u02bc\u2032\u00b4\u0060")
_DROP = "\x01"  # in the one-for-one copy: a character folding drops
_SKELETON = icu.SpoofChecker()


def _fold_char(ch: str) -> str:
    if ch.isascii():
        if ch in "\n\r":
            return "\n"
        if ch.isspace():
            return " "
        if ch == "_":
            return "-"
        return ch if ch.isprintable() else _NOT_WORD
    if ch in _QUOTES:
        return "'"
    out: list[str] = []
    for c in unicodedata.normalize("NFKD", ch):
        category = unicodedata.category(c)
        if c.isascii():
            out.append(_fold_char(c))
        elif category in ("Mn", "Me", "Cf"):  # accents, zero-width spaces and joiners, BOM
            continue
        elif c in "\u2028\u2029\x85":
            out.append("\n")
        elif c.isspace():
            out.append(" ")
        elif category == "Pd" or c == "\u2212":
            out.append("-")
        elif category == "Cs":  # a lone surrogate
            out.append(_NOT_WORD)
        else:
            skeleton = "".join(
                s
                for s in unicodedata.normalize("NFKD", _SKELETON.getSkeleton(0, c))
                if unicodedata.category(s) not in ("Mn", "Me", "Cf")
            )
            if skeleton and skeleton.isascii() and skeleton.isprintable():
                out.append(skeleton.replace("_", "-"))
            else:
                out.append(_IN_WORD if category[0] in "LN" else _NOT_WORD)
    return "".join(out)


class _OneForOne(dict[int, str]):
    """``str.translate``'s table: every character to one ASCII character (``_DROP`` for one
    folding drops; a placeholder for one that folds to several, a ligature or "™": no model
    name has them). Filled as characters are first seen, and bounded: hostile text can use
    every code point."""

    def __missing__(self, code: int) -> str:
        folded = _fold_char(chr(code))
        if folded == "":
            folded = _DROP
        elif len(folded) > 1:
            folded = _IN_WORD if any(c.isalnum() for c in folded) else _NOT_WORD
        if len(self) > 100_000:
            self.clear()
        self[code] = folded
        return folded


_ONE_FOR_ONE = _OneForOne()
_IRREGULAR = (b"\x01", b"  ", b"\n\n", b" \n", b"\n ")  # what one for one cannot say


@dataclass(frozen=True, slots=True)
class _Folded:
    """The folded copy (``data``: ASCII bytes) and where each of its characters came from."""

    data: bytes
    length: int  # of the original text
    origin: npt.NDArray[np.intp] | None  # each character's offset in the text; None: the same

    def original(self, pos: int) -> int:
        return pos if self.origin is None else int(self.origin[pos])

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of folded ``[start, end)``, with the invisible characters that
        follow it (a zero-width space, a combining accent on its last letter)."""
        if self.origin is None:
            return start, end
        first = self.original(start)
        if end >= len(self.data):
            return first, self.length
        return first, self.original(end) if self.origin[end] > self.origin[end - 1] + 1 else (
            self.original(end - 1) + 1
        )


def _folded(text: str) -> _Folded:
    """Fold ``text``: one character for one through ``str.translate``, then, only where there
    are any, dropped characters taken out and each run of spaces made one (a line break if it
    has one), with numpy: no Python loop over the text."""
    one = text.translate(_ONE_FOR_ONE).encode("ascii")
    if not any(irregular in one for irregular in _IRREGULAR):
        return _Folded(one, len(text), None)
    chars = np.frombuffer(one, dtype=np.uint8)
    kept_at = np.flatnonzero(chars != 1)
    kept = chars[kept_at]
    space = (kept == 0x20) | (kept == 0x0A)
    after_space = np.zeros_like(space)
    after_space[1:] = space[:-1]
    first = space & ~after_space  # the first of a run of spaces: the one kept
    breaks = kept == 0x0A
    if breaks.any():
        run = np.cumsum(first) - 1  # for each space, the index of its run
        starts = np.flatnonzero(first)
        kept = kept.copy()
        kept[starts[np.unique(run[breaks])]] = 0x0A
    keep = ~space | first
    return _Folded(kept[keep].tobytes(), len(text), kept_at[keep])


# ---------------------------------------------------------------------------------------------
# The response set's own names


def _ascii_name(name: str) -> str:
    return "".join(_fold_char(ch) for ch in name)


def _token_pattern(token: str) -> str:
    """A token of a name as it may be written: camel-case parts apart ("Secret Model"), a
    hyphen or a space between letters and the digits after them ("Med-42", "Med 42"; a lab
    value after it is left: "MED 42 mg"), a hyphen between digits and letters ("70-b")."""
    out: list[str] = []
    previous = ""
    for ch in token:
        if previous:
            if (previous.islower() and ch.isupper()) or (previous.isalpha() and ch.isdigit()):
                out.append(_SEP)
            elif previous.isalpha() != ch.isalpha():
                out.append(r"[\-.]?")
        out.append(ch.lower())
        previous = ch
    return "".join(out)


def _token_kind(token: str) -> str:
    """'generic', 'builtin' (a family or maker above), 'plain' (distinctive) or 'word'."""
    word = token.lower()
    raw = word.encode("ascii")
    if len(word) < 2 or word in _GENERIC or _VERSIONISH.fullmatch(raw):
        return "generic"
    if _BUILTIN.fullmatch(raw):
        return "builtin"
    letters = sum(ch.isalpha() for ch in word)
    if any(ch.isdigit() for ch in word):
        # "Med42" is a name; "M42" and "T5" are as likely a code or a vertebra.
        return (
            "plain" if letters >= 2 and len(word) >= 4 and not lexicon.is_clinical(word) else "word"
        )
    return "word" if len(word) < 4 or lexicon.is_ordinary(word) else "plain"


@dataclass(frozen=True)
class _Names:
    plain: tuple[str, ...]  # masked wherever they stand
    words: tuple[str, ...]  # self-reference targets
    near: frozenset[str]  # distinctive tokens, for near misses


def _split_tokens(name: str) -> list[str]:
    tokens: list[str] = []
    current: list[str] = []
    for ch in name:
        if ch.isascii() and ch.isalnum():
            current.append(ch)
        elif current:
            tokens.append("".join(current))
            current = []
    if current:
        tokens.append("".join(current))
    return tokens


def _is_size(token: str) -> bool:
    # "8B", "v2", "13b": a version a model is named with; "1" of "Alpha-1" is not one.
    return any(ch.isdigit() for ch in token) and any(ch.isalpha() for ch in token)


# Tags a model is trained or packaged with, never written after an ordinary word otherwise.
_TAGS = frozenset(("instruct", "sft", "dpo", "rlhf", "hf", "gguf", "ggml", "awq", "gptq", "exl2"))
_SIZE = linear.BytesPattern(rb"[0-9]{1,4}[a-z]{1,2}")


def _joined(tokens: list[str]) -> str:
    """Tokens of a name as written together; a size at the end also spaced ("70 B") or cut
    short after a hyphen ("Beacon-13" of Beacon-13B)."""
    *head, last = tokens
    parts = [_token_pattern(t) for t in head]
    if head and _SIZE.fullmatch(last.lower().encode("ascii")):
        digits = last.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        unit = last[len(digits) :].lower()
        return _SEP.join(parts) + rf"(?:{_SEP}{digits}[\s\-.]?{unit}|-{digits})"
    return _SEP.join([*parts, _token_pattern(last)])


def _names(model_names: tuple[str, ...]) -> _Names:
    """Patterns for the models of a response set. A generated response's name is
    "<model>@<context length>"; a hub id's owner ("epfl-llm/meditron-7b") is a maker, masked
    by its distinctive tokens and whole ("M42 Health"), never by an ordinary word of it: a
    model does not call itself "health" (``m42-health``)."""
    plain: set[str] = set()
    words: set[str] = set()
    near: set[str] = set()
    for raw in model_names:
        parts = raw.rsplit("@", 1)[0].split("/")
        for index, part in enumerate(parts):
            owner = index < len(parts) - 1
            folded = _ascii_name(part.strip())
            tokens = _split_tokens(folded)
            if not tokens:
                continue
            kinds = [_token_kind(t) for t in tokens]
            for i, (token, kind) in enumerate(zip(tokens, kinds, strict=True)):
                if kind == "plain":
                    plain.add(_token_pattern(token))
                    plain.add(_letters_apart(token.lower()))  # "M e d 4 2"
                    near.add(token.lower())
                elif kind == "word" and not owner:
                    words.add(_token_pattern(token))
                    if len(token) >= 4:
                        plain.add(_letters_apart(token.lower()))  # "A t l a s"
                    # A word with the size after it in the name is the name ("Aloe-8B" of
                    # Llama3-Aloe-8B, "Atlas 70 B", "Beacon-13"), wherever it stands.
                    for j in range(i + 1, len(tokens)):
                        if kinds[j] != "generic":
                            break
                        if _is_size(tokens[j]):
                            plain.add(_joined(tokens[i : j + 1]))
                            break
                    # A word with a training tag is the name ("Fjord-Instruct", "FjordInstruct").
                    if i + 1 < len(tokens) and tokens[i + 1].lower() in _TAGS:
                        plain.add(_joined(tokens[i : i + 2]))
            distinct = any(k in ("plain", "builtin") for k in kinds)
            whole = _joined(tokens)
            has_digit = any(ch.isdigit() for ch in part)
            # Every "GPT" of a response is tried against each pattern: a name the built-in
            # rules already mask whole ("gpt-4") would only make each try twice.
            builtin = _BUILTIN_VERSIONED.fullmatch(folded.encode("ascii"))
            if len(tokens) > 1 and (distinct or has_digit or not owner) and not builtin:
                (plain if distinct or has_digit else words).add(whole)
            stem: list[str] = []
            for token, kind in zip(tokens, kinds, strict=True):
                if kind == "generic":
                    break
                stem.append(token)
            if 1 < len(stem) < len(tokens):
                stem_distinct = any(k in ("plain", "builtin") for k in kinds[: len(stem)])
                pattern = _SEP.join(_token_pattern(t) for t in stem)
                if stem_distinct:
                    plain.add(pattern)
                elif not owner:
                    words.add(pattern)
    return _Names(
        tuple(sorted(plain, key=len, reverse=True)),
        tuple(sorted(words, key=len, reverse=True)),
        frozenset(near),
    )


class _Rule:
    """One RE2 pattern and what a match of it needs besides: the prefix it starts with (the
    name begins where that ends), or the name it starts with when words follow it."""

    def __init__(
        self,
        pattern: str,
        *,
        prefix: linear.BytesPattern | None = None,
        head: linear.BytesPattern | None = None,
        after: linear.BytesPattern | None = None,
        self_end: bool = False,
        units: bool = False,
        capital: bool = False,
        introduced: bool = False,
    ) -> None:
        # With ``introduced``, group 1 is the name after the prefix, and group 2 a name no list
        # knows ("I'm Zorblax."), tried where no name of the lists is: one pass for both.
        self.pattern = linear.BytesPattern(pattern.encode("ascii"), groups=introduced)
        self.prefix = prefix
        self.head = head
        self.after = after  # must match where the name ends ("As Claude" + ", I")
        self.self_end = self_end  # the name is not followed by a hyphen ("by meta-analysis")
        self.units = units  # a lab value after it is taken off ("GPT 45 U/L")
        self.capital = capital  # the name starts with a capital ("this is Cedar")
        self.introduced = introduced  # a name or an ordinary word (``_introduced``)


@dataclass(frozen=True)
class _Matcher:
    rules: tuple[_Rule, ...]
    heads: linear.BytesPattern  # anything that can start a match: nothing to do without one
    heads_source: str
    candidates: linear.BytesPattern  # the words that are masked only in context
    near: frozenset[str]


@lru_cache(maxsize=256)
def _matcher(model_names: tuple[str, ...]) -> _Matcher:
    names = _names(model_names)
    plain = _alternatives(names.plain + _PLAIN_FAMILIES)
    families = _alternatives(_WORD_FAMILIES)
    makers = _alternatives(_MAKERS)
    words = _alternatives(names.words)
    self_only = _alternatives(_SELF_ONLY)
    named = f"(?:{families}|{makers})"  # what "called" and "by" may name
    anyone = f"(?:{families}|{makers}|{words})"
    introduced = f"(?:{families}|{makers}|{words}|{self_only})"  # what a self-reference may
    said = f"(?:{families}|{words}|{self_only})"
    head_named = _pattern(rf"(?i)\b{named}{_CHAIN}\b")
    head_words = _pattern(rf"(?i)\b{words}{_CHAIN}\b")
    head_anyone = _pattern(rf"(?i)\b{anyone}{_CHAIN}\b")
    rules = (
        _Rule(rf"(?i)\b{plain}{_CHAIN}\b", units=True),
        _Rule(rf"\b(?-i:PaLM)(?i:{_CHAIN})\b", units=True),
        _Rule(rf"(?i)\b{families}{_VERSIONS}\b", units=True),
        _Rule(
            rf"(?i)\b{_SELF}((?:{introduced}{_CHAIN}|({_INTRODUCED})))\b",
            prefix=_PREFIX_SELF,
            after=_AFTER_SELF,
            self_end=True,
            units=True,
            introduced=True,
        ),
        _Rule(
            rf"(?i)\b{_THIS_IS}((?:{introduced}{_CHAIN}|({_INTRODUCED})))\b",
            prefix=_PREFIX_THIS_IS,
            after=_AFTER_SELF,
            self_end=True,
            units=True,
            capital=True,
            introduced=True,
        ),
        # Headers and attributions of the set's names, families and makers.
        _Rule(rf"(?i){_HEADER}{anyone}{_CHAIN}\b", prefix=_PREFIX_HEADER, self_end=True),
        _Rule(rf"(?i){_FROM}{anyone}{_CHAIN}\b", prefix=_PREFIX_FROM, self_end=True, capital=True),
        _Rule(
            rf"(?i){_ASSISTANT}{anyone}{_CHAIN}\b",
            prefix=_PREFIX_ASSISTANT,
            self_end=True,
            capital=True,
        ),
        _Rule(rf"(?i){_BRACKET}{anyone}{_CHAIN}\]", prefix=_PREFIX_BRACKET, head=head_anyone),
        _Rule(
            rf"(?i){_THE}{anyone}{_CHAIN}{_THE_AFTER}",
            prefix=_PREFIX_THE,
            head=head_anyone,
            capital=True,
        ),
        _Rule(
            rf"(?i)\b{anyone}{_CHAIN}{_HERE_AFTER}",
            head=head_anyone,
            after=_AFTER_SELF,
            capital=True,
        ),
        _Rule(rf"(?i)\b{anyone}{_CHAIN}{_SAYS_AFTER}", head=head_anyone, capital=True),
        _Rule(rf"(?i)\b(?:claude|anthropic)(?:'s)?\s{self_only}\b"),
        _Rule(
            rf"(?i)\b{_SELF_NAMED}{named}{_CHAIN}\b",
            prefix=_PREFIX_SELF_NAMED,
            self_end=True,
            units=True,
        ),
        _Rule(
            rf"(?i)\b{_AS}((?:{said}{_CHAIN}|({_INTRODUCED})))\b",
            prefix=_PREFIX_AS,
            after=_AFTER_AS,
            introduced=True,
        ),
        _Rule(
            rf"(?i){_SIGN_OFF_BEFORE}((?:{introduced}{_CHAIN}|({_INTRODUCED})))\b",
            prefix=_PREFIX_SIGN_OFF,
            after=_AFTER_LINE,
            introduced=True,
        ),
        _Rule(rf"(?i)\b{_BY}{makers}\b", prefix=_PREFIX_BY, self_end=True),
        _Rule(rf"(?i)\b{named}{_CHAIN}\+{{0,2}}{_AFTER}", head=head_named),
        _Rule(rf"(?i)\b{words}{_CHAIN}\+{{0,2}}{_AFTER_NAME}", head=head_words),
    )
    heads = (
        rf"(?i)(?:\b(?:{plain}|{introduced}|PaLM)|\b{_SELF}|\b{_THIS_IS}|\b{_AS}|"
        rf"{_SIGN_OFF_BEFORE}|{_HEADER}|{_FROM}|{_ASSISTANT}|{_BRACKET})"
    )
    return _Matcher(
        rules=rules,
        heads=_pattern(heads),
        heads_source=heads,
        candidates=_pattern(rf"(?i)\b{anyone}{_CHAIN}\b"),
        near=names.near,
    )


# ---------------------------------------------------------------------------------------------
# Matching


def _is_word(data: bytes, pos: int) -> bool:
    return 0 <= pos < len(data) and data[pos] in _WORD_BYTES


def _with_plus(data: bytes, end: int) -> int:
    # "Command R+", "Vicuna+": a plus glued to a name is part of it.
    plus = end
    while plus < len(data) and plus - end < 2 and data[plus] == 0x2B:
        plus += 1
    return plus if plus > end and not _is_word(data, plus) else end


_UNIT_STARTS = frozenset(b".%0123456789uUiImM")


def _without_units(data: bytes, start: int, end: int, rule: linear.BytesPattern) -> int | None:
    """The end of a match once a lab value is taken off it ("GPT 45 U/L" keeps nothing), or
    None when what is left is no longer a match of ``rule``."""
    if end >= len(data):
        return end
    following = data[end]
    if following in b" \n":  # the unit may come after one space: "45 U/L"
        if end + 1 >= len(data) or data[end + 1] not in _UNIT_STARTS:
            return end
    elif following not in _UNIT_STARTS:
        return end
    if _AFTER_UNITS.match(data, end) is None:
        return end
    # The last part is the number: drop it with the separator before it.
    cut = end
    while cut > start and (data[cut - 1] in _WORD_BYTES or data[cut - 1] == 0x2E):
        cut -= 1
    if cut == start or not (0x30 <= data[cut] <= 0x39 or data[cut] in b"vV"):
        return None
    while cut > start and data[cut - 1] in b" -.":
        cut -= 1
    if cut == start or not rule.fullmatch(data, start, cut):
        return None
    return cut


_NOT_A_NAME = lexicon.FUNCTION_WORDS


@lru_cache(maxsize=4096)  # a hostile text repeats one name; the words are few
def _introduced(name: bytes) -> str | None:
    """What a self-introduction gives that no list knows: "name" (a word no word list has,
    "Zorblax"; a word with a digit and two letters, "Quillon9"), "word" (only ordinary or
    clinical words: "I am Sorry.", for an admin to confirm) or None (nothing but function
    words, versions and generic parts: "I'm an AI.")."""
    kind: str | None = None
    for token in _split_tokens(name.decode("ascii")):
        word = token.lower()
        raw = word.encode("ascii")
        if word in _NOT_A_NAME or word in _GENERIC or _VERSIONISH.fullmatch(raw) or len(word) < 2:
            continue
        if any(ch.isdigit() for ch in word):
            letters = sum(ch.isalpha() for ch in word)
            if letters >= 2 and len(word) >= 4 and not lexicon.is_clinical(word):
                return "name"
        elif not lexicon.is_ordinary(word):
            return "name"
        kind = "word"
    return kind


def _ungrouped(rule: _Rule, data: bytes) -> Iterator[list[tuple[int, int]]]:
    for span in rule.pattern.spans(data):
        yield [span]


def _spans(
    data: bytes, matcher: _Matcher, words: list[tuple[int, int]] | None = None
) -> list[tuple[int, int]]:
    """The spans masking covers; ``words`` (when given) gets the ordinary words a
    self-introduction gave as a name ("I am Sorry."), which are left as written."""
    if matcher.heads.search(data) is None:
        return []
    found: list[tuple[int, int]] = []
    introduced: list[tuple[int, int]] = []
    for rule in matcher.rules:
        matches = rule.pattern.group_spans(data) if rule.introduced else _ungrouped(rule, data)
        for spans in matches:
            start, end = spans[0]
            unknown = rule.introduced and spans[2][0] >= 0
            end = _with_plus(data, end)
            if rule.after is not None and rule.after.match(data, end) is None:
                continue
            if rule.self_end and end < len(data) and data[end] == 0x2D:  # "-"
                continue
            if rule.units:
                cut = _without_units(data, start, end, rule.pattern)
                if cut is None:
                    continue
                end = cut
            if rule.introduced:
                start = spans[1][0]  # group 1: the name, after its prefix
            elif rule.prefix is not None:
                prefix = rule.prefix.match(data, start)
                assert prefix is not None  # the rule's pattern starts with it
                start = prefix[1]
            if rule.capital and not 0x41 <= data[start] <= 0x5A:  # "A".."Z"
                continue
            if rule.head is not None:
                head = rule.head.match(data, start)
                assert head is not None  # the rule's pattern starts with it
                end = _with_plus(data, head[1])
            (introduced if unknown else found).append((start, end))
    if introduced:
        covered = _Covered(sorted(found))
        for start, end in introduced:
            if covered.contains(start, end):
                continue
            kind = _introduced(data[start:end])
            if kind == "name":
                found.append((start, end))
            elif kind == "word" and words is not None:
                words.append((start, end))
    return found


class _Covered:
    """Whether a span lies inside one already found (sorted spans)."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.starts = [s for s, _ in spans]
        self.reach: list[int] = []
        furthest = -1
        for _, e in spans:
            furthest = max(furthest, e)
            self.reach.append(furthest)

    def contains(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self.starts, start) - 1
        return i >= 0 and self.reach[i] >= end


def _merged(spans: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    spans.sort()
    current: tuple[int, int] | None = None
    for start, end in spans:
        if current is not None and start <= current[1]:
            current = (current[0], max(current[1], end))
            continue
        if current is not None:
            yield current
        current = (start, end)
    if current is not None:
        yield current


def model_name_spans(text: str, model_names: Iterable[str] = ()) -> list[tuple[int, int]]:
    """Spans of ``text`` (original indexes, end exclusive) that name a model or its maker."""
    if not text:
        return []
    folded = _folded(text)
    matcher = _matcher(tuple(sorted({n for n in model_names if n})))
    return [folded.span(s, e) for s, e in _merged(_spans(folded.data, matcher)) if e > s]


def heads_pattern(model_names: Iterable[str] = ()) -> str:
    """The RE2 pattern of every word a match can start with: what ``bench_masking`` times the
    raw library with."""
    return _matcher(tuple(sorted({n for n in model_names if n}))).heads_source


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


# ---------------------------------------------------------------------------------------------
# Near misses: for an admin to look at, never masked

_NEAR_MIN = 5  # a shorter word is one edit from too many others
_NEAR_MAX = 40
_ALNUM_RUN = linear.BytesPattern(rb"[0-9A-Za-z]{%d,%d}" % (_NEAR_MIN - 1, _NEAR_MAX + 1))
_FAMILIES_NEAR = (
    "chatgpt openai anthropic deepmind deepseek mixtral vicuna meditron gemini claude falcon "
    "mistral nemotron koala alpaca dolly orca llama gemma qwen copilot"
)
_FAMILY_WORDS = frozenset(_FAMILIES_NEAR.split())


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


@lru_cache(maxsize=256)
def _near_index(model_names: tuple[str, ...]) -> dict[str, str]:
    """Every name one deletion away (and the name itself), to the name: two words are one edit
    apart (a letter changed, added, dropped or two swapped) when such variants meet."""
    index: dict[str, str] = {}
    for name in _matcher(model_names).near | _FAMILY_WORDS:
        if len(name) >= _NEAR_MIN:
            index.setdefault(name, name)
            for variant in _deletions(name):
                index.setdefault(variant, name)
    return index


def near_misses(text: str, model_names: Iterable[str] | str = ()) -> list[str]:
    """Words left as written that look like a name, as written: one edit from a distinctive
    name ("Mixtrall", "Meditorn"), or a name's own word outside a self-reference ("Atlas",
    "Gemini"). For an admin to confirm; masking never acts on them."""
    if not text:
        return []
    names = (model_names,) if isinstance(model_names, str) else tuple(model_names)
    key = tuple(sorted({n for n in names if n}))
    folded = _folded(text)
    matcher = _matcher(key)
    found: list[tuple[int, int]] = []
    masked = _Covered(list(_merged(_spans(folded.data, matcher, found))))
    index = _near_index(key)
    for start, end in matcher.candidates.spans(folded.data):
        if not masked.contains(start, start + 1):
            found.append((start, end))
    for start, end in _ALNUM_RUN.spans(folded.data):
        if (
            _is_word(folded.data, start - 1)
            or _is_word(folded.data, end)
            or end - start > _NEAR_MAX
        ):
            continue
        word = folded.data[start:end].decode("ascii").lower()
        if word in index and index[word] == word:
            continue  # the name itself: masked, or a word family left alone on purpose
        if (word in index or any(v in index for v in _deletions(word))) and not masked.contains(
            start, end
        ):
            found.append((start, end))
    words: list[str] = []
    for start, end in sorted(found):
        first, last = folded.span(start, end)
        words.append(text[first:last])
    return list(dict.fromkeys(words))
