"""Prompt templates and truncation of the record to a model's context (plain Python).

The default template is HELM's for its ``medalign`` scenario, word for word
(stanford-crfm/helm, ``src/helm/benchmark/scenarios/medalign_scenario_helper.py``,
``preprocess_prompts``: ``prompt_string``). HELM budgets the record as
``context_length - generation_length - tokens(template) - tokens(question)`` and keeps the *last*
tokens of the record (``encoded_ehr[-target_ehr_length:]``); it counts with tiktoken and decodes
the kept ids, so its prompt can re-tokenize to more than the budget. Here the model's own
tokenizer counts, the kept record is an exact suffix of the serialized text (cut at a token's
character offset, never decoded), and the finished prompt is re-tokenized and cut further until it
fits: ``tokens(prompt) + max_new_tokens <= context_length``, exactly.

Policies (``TRUNCATION_POLICIES``):

- ``recent`` (HELM): the most recent tokens of the whole record;
- ``bm25`` (what MedAlign's code can do, ``retrieve_most_relevant_visits``): visits ranked by BM25
  against the instruction (``review.search``), taken best first until they exceed the budget,
  re-sorted by time, then cut to the most recent tokens as above.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from review.search import query_terms, tokenize

from .record_text import RecordText, join_segments

# HELM's medalign template (source above). Placeholders: {ehr} and {question}.
HELM_TEMPLATE = (
    "Instruction: Answer the following question based on the EHR:\n\n"
    "EHR: {ehr}\n\nQuestion: {question}\n\nAnswer:"
)
HELM_TEMPLATE_NAME = "helm-medalign"
TRUNCATION_POLICIES = ("recent", "bm25")
_PLACEHOLDER = re.compile(r"\{(ehr|question)\}")


class PromptError(ValueError):
    """A template or budget that cannot make a prompt (the message quotes no patient text)."""


class Tokenizer(Protocol):
    """What truncation needs from a model's tokenizer (``backends.ModelTokenizer``)."""

    def count(self, text: str) -> int:
        """Tokens of ``text`` as the model receives it (special tokens included)."""
        ...

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of each token of ``text`` (no special tokens)."""
        ...


@dataclass(frozen=True)
class PromptTemplate:
    text: str = HELM_TEMPLATE
    name: str = HELM_TEMPLATE_NAME

    def __post_init__(self) -> None:
        found = _PLACEHOLDER.findall(self.text)
        if found.count("ehr") != 1 or found.count("question") != 1:
            raise PromptError("a prompt template needs {ehr} and {question}, each exactly once")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def version(self) -> str:
        """``helm-medalign@<sha12>``, or ``custom@<sha12>`` for an edited template."""
        name = HELM_TEMPLATE_NAME if self.text == HELM_TEMPLATE else (self.name or "custom")
        if name == HELM_TEMPLATE_NAME and self.text != HELM_TEMPLATE:
            name = "custom"
        return f"{name}@{self.sha256[:12]}"

    def fill(self, *, ehr: str, question: str) -> str:
        # One pass over the template only: braces in the record or the question stay as written.
        values = {"ehr": ehr, "question": question}
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.text)


@dataclass(frozen=True)
class BuiltPrompt:
    """A prompt and what it was built from. ``prompt`` holds patient text: never log it."""

    prompt: str
    prompt_tokens: int
    record_tokens_kept: int
    record_chars_kept: int
    record_chars_total: int
    record_truncated: bool
    policy: str
    visits_selected: int | None = None  # bm25: visits chosen before the final cut
    visits_total: int | None = None
    extra: dict[str, int] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()


def suffix_by_tokens(text: str, n_tokens: int, tokenizer: Tokenizer) -> tuple[str, int, bool]:
    """The most recent ``n_tokens`` tokens of ``text`` as an exact suffix of it.

    Returns (suffix, tokens in it, whether anything was cut). Only a window at the end of the text
    is tokenized (doubled until it holds more than ``n_tokens`` tokens, or is the whole text), so
    a 50,000-event record is never tokenized whole; the caller re-counts the finished prompt.
    The window's tokens are kept for the last few texts: every instruction on a record, at one
    context length, cuts the same tail at a slightly different place.
    """
    if n_tokens <= 0 or not text:
        return "", 0, bool(text)
    start, spans = _tail_tokens(text, n_tokens, tokenizer)
    if len(spans) <= n_tokens:  # the whole text fits
        return text, len(spans), False
    # The first kept token starts the suffix; a window's first token may be a fragment, which is
    # why the window holds more tokens than are kept.
    cut = start + spans[len(spans) - n_tokens][0]
    return text[cut:], n_tokens, True


_TAILS: OrderedDict[tuple[str, int, int], tuple[int, list[tuple[int, int]]]] = OrderedDict()


def _tail_tokens(
    text: str, n_tokens: int, tokenizer: Tokenizer
) -> tuple[int, list[tuple[int, int]]]:
    """(window start, token spans in the window) with more than ``n_tokens`` tokens, or all."""
    key = (str(getattr(tokenizer, "folder", id(tokenizer))), len(text), hash(text))
    cached = _TAILS.get(key)
    if cached is not None and (len(cached[1]) > n_tokens or cached[0] == 0):
        _TAILS.move_to_end(key)
        return cached
    window = min(len(text), max(64, n_tokens * 5))
    while True:
        start = len(text) - window
        spans = tokenizer.offsets(text[start:])
        if len(spans) > n_tokens or start == 0:
            break
        window = min(len(text), window * 2)
    _TAILS[key] = (start, spans)
    while len(_TAILS) > 4:
        _TAILS.popitem(last=False)
    return start, spans


def build_prompt(
    *,
    record: RecordText,
    question: str,
    template: PromptTemplate,
    tokenizer: Tokenizer,
    context_length: int,
    max_new_tokens: int,
    policy: str = "recent",
) -> BuiltPrompt:
    """The prompt for ``question`` over ``record``, fitting ``context_length`` to the token."""
    if policy not in TRUNCATION_POLICIES:
        raise PromptError(f"unknown truncation policy {policy!r}; choose from recent, bm25")
    limit = context_length - max_new_tokens
    if limit <= 0:
        raise PromptError(
            f"context length {context_length} leaves no room for {max_new_tokens} new tokens"
        )
    empty = tokenizer.count(template.fill(ehr="", question=question))
    if empty > limit:
        raise PromptError(
            f"the template and the instruction alone take {empty} tokens, more than the "
            f"{limit} a context of {context_length} leaves after {max_new_tokens} new tokens"
        )
    full = record.text
    source = full
    selected: int | None = None
    if policy == "bm25":
        source, selected = _bm25_selection(record, question, limit - empty, tokenizer)
    budget = limit - empty
    kept, n_kept, cut = suffix_by_tokens(source, budget, tokenizer)
    cut = cut or len(source) < len(full)
    for _ in range(64):
        prompt = template.fill(ehr=kept, question=question)
        n_prompt = tokenizer.count(prompt)
        if n_prompt <= limit:
            break
        # Tokens can merge across the seam between the template and the record: cut further.
        budget = max(0, budget - (n_prompt - limit))
        kept, n_kept, _ = suffix_by_tokens(source, budget, tokenizer)
        cut = True
    else:  # pragma: no cover - each round drops at least one token
        raise PromptError("the record could not be cut to fit the context length")
    return BuiltPrompt(
        prompt=prompt,
        prompt_tokens=n_prompt,
        record_tokens_kept=n_kept,
        record_chars_kept=len(kept),
        record_chars_total=len(full),
        record_truncated=cut,
        policy=policy,
        visits_selected=selected,
        visits_total=len(record.segments) if policy == "bm25" else None,
    )


def _bm25_selection(
    record: RecordText, question: str, budget: int, tokenizer: Tokenizer
) -> tuple[str, int]:
    """Visits ranked by BM25 against the question, best first until over budget, by time."""
    segments = record.segments
    order = _bm25_index(record).rank(query_terms(question))
    # Visits that share no term with the question follow, most recent first (MedAlign's code
    # ranks every visit; a zero score leaves them in retrieval order, here recency).
    matched = set(order)
    order += [i for i in range(len(segments) - 1, -1, -1) if i not in matched]
    chosen: list[int] = []
    used = 0
    for i in order:
        chosen.append(i)
        used += _segment_tokens(record, tokenizer, i)
        if used > budget:  # as MedAlign's code: the visit that crosses the budget is kept
            break
    chosen.sort()  # segments are stored oldest first
    text = join_segments(record.header, [segments[i].text for i in chosen])
    return text, len(chosen)


# A run asks for one record's prompts once per instruction and context length: the visits' BM25
# documents and model-token counts are computed once per record (and tokenizer) and reused.
class Bm25Index:
    """``review.search.bm25_rank`` over fixed documents, indexed once (postings per term).

    Same scores and order as ``bm25_rank`` (Okapi BM25, Lucene's "+1" idf, k1 1.2, b 0.75, ties
    by document index); ``bm25_rank`` counts every document's terms on every call, which for
    a 500-visit record is most of a prompt's cost.
    """

    def __init__(self, documents: Sequence[Sequence[str]], *, k1: float = 1.2, b: float = 0.75):
        from collections import Counter

        self.n = len(documents)
        self.lengths = [len(d) for d in documents]
        avgdl = sum(self.lengths) / self.n if self.n else 0.0
        self.avgdl = avgdl or 1.0
        self.k1, self.b = k1, b
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, doc in enumerate(documents):
            for term, tf in Counter(doc).items():
                self.postings.setdefault(term, []).append((i, tf))

    def rank(self, query: Sequence[str]) -> list[int]:
        """Indexes of the documents sharing a term with ``query``, best first."""
        import math

        scores: dict[int, float] = {}
        for term in set(query):
            posting = self.postings.get(term, [])
            df = len(posting)
            idf = math.log((self.n - df + 0.5) / (df + 0.5) + 1.0)
            for i, tf in posting:
                norm = tf + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avgdl)
                scores[i] = scores.get(i, 0.0) + idf * tf * (self.k1 + 1) / norm
        ranked = [i for i, score in scores.items() if score > 0]
        ranked.sort(key=lambda i: (-scores[i], i))
        return ranked


@lru_cache(maxsize=4)
def _bm25_index(record: RecordText) -> Bm25Index:
    return Bm25Index([tokenize(s.text) for s in record.segments])


_SEGMENT_TOKENS: OrderedDict[tuple[str, RecordText], list[int | None]] = OrderedDict()


def _segment_tokens(record: RecordText, tokenizer: Tokenizer, index: int) -> int:
    key = (str(getattr(tokenizer, "folder", id(tokenizer))), record)
    counts = _SEGMENT_TOKENS.get(key)
    if counts is None:
        counts = _SEGMENT_TOKENS[key] = [None] * len(record.segments)
        while len(_SEGMENT_TOKENS) > 4:
            _SEGMENT_TOKENS.popitem(last=False)
    if counts[index] is None:
        counts[index] = len(tokenizer.offsets(record.segments[index].text))
    return counts[index]  # type: ignore[return-value]


def count_tokens(texts: Sequence[str], tokenizer: Tokenizer) -> int:
    return sum(tokenizer.count(t) for t in texts)
