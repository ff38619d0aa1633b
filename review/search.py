"""Two BM25 rankers and a safe highlighter, for the record excerpt, record search and prompts.

Deliberately tiny: the excerpt ranks at most a few hundred candidate documents (recent notes and
distinct event names, chosen by the database), so an in-process BM25 is fast enough and needs no
search server. Nothing here touches the database.

- ``rank_concepts``: what the excerpt and search use. A query is a list of concepts
  (review.vocabulary), each counted wherever any of its variants occurs (a stem, an
  abbreviation, a synonym phrase).
- ``bm25_rank`` over ``query_terms`` and ``tokenize``: plain terms (lower case, a plural "s"
  dropped), kept exactly as they were for the generation runs' ``bm25`` truncation policy
  (scoring.llm.prompts), whose prompts a changed tokenizer would silently change.
"""

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from review.vocabulary import Concept, counts, spans

# Linear with ``re``: one character class, so each try ends at the first character outside it
# and the next starts after it (a hostile record cannot make it backtrack).
_WORD = re.compile(r"\w+", re.UNICODE)

# Question words and fillers that carry no information about which part of a record matters.
_STOPWORDS = (
    "a an and are as at be been being but by can could did do does for from had has have how "
    "i if in into is it its me my no not of on or our please should so than that the their "
    "them then there these they this those to was we were what when where which who whom why "
    "will with would you your any all about after before over under up out patient patients "
    "patient's s t most recent latest last current list give tell "
)
STOPWORDS = frozenset(_STOPWORDS.split())


def normalize(token: str) -> str:
    """Lower-case and strip a plural "s" so "medications" finds "medication"."""
    token = token.lower()
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        token = token[:-1]
    return token


def tokenize(text: str) -> list[str]:
    return [
        normalize(m.group(0))
        for m in _WORD.finditer(text or "")
        if m.group(0).lower() not in STOPWORDS
    ]


def query_terms(text: str) -> list[str]:
    """The distinct informative terms of a query, in order of first appearance."""
    seen: dict[str, None] = {}
    for token in tokenize(text):
        if len(token) > 1 or token.isdigit():
            seen.setdefault(token, None)
    return list(seen)


@dataclass(frozen=True)
class Scored:
    index: int
    score: float


def bm25_rank(
    query: Sequence[str],
    documents: Sequence[Sequence[str]],
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> list[Scored]:
    """Documents (as token lists) that share a term with ``query``, best first.

    Okapi BM25 with the "+1" idf of Lucene, so very common terms never score negative. Ties are
    broken by document index, which callers order most recent first.
    """
    if not query or not documents:
        return []
    n = len(documents)
    avgdl = sum(len(d) for d in documents) / n or 1.0
    frequencies = [Counter(d) for d in documents]
    terms = set(query)
    df = Counter(term for freq in frequencies for term in terms if term in freq)
    idf = {t: math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1.0) for t in terms}
    scored = []
    for i, freq in enumerate(frequencies):
        dl = len(documents[i])
        score = 0.0
        for term in terms:
            tf = freq.get(term, 0)
            if tf:
                score += idf[term] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
        if score > 0:
            scored.append(Scored(i, score))
    scored.sort(key=lambda s: (-s.score, s.index))
    return scored


def rank_concepts(
    query: Sequence[Concept],
    documents: Sequence[Sequence[str]],
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> list[Scored]:
    """Documents (as stemmed token lists) in which a concept of ``query`` occurs, best first.

    Okapi BM25 with the "+1" idf of Lucene, so very common terms never score negative; a
    concept's frequency in a document counts every variant. Ties are broken by document index,
    which callers order most recent first.
    """
    if not query or not documents:
        return []
    n = len(documents)
    avgdl = sum(len(d) for d in documents) / n or 1.0
    frequencies = [counts(query, d) for d in documents]
    df = [sum(1 for f in frequencies if f[j]) for j in range(len(query))]
    idf = [math.log((n - d + 0.5) / (d + 0.5) + 1.0) for d in df]
    scored = []
    for i, freq in enumerate(frequencies):
        dl = len(documents[i])
        score = 0.0
        for j, tf in enumerate(freq):
            if tf:
                score += idf[j] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
        if score > 0:
            scored.append(Scored(i, score))
    scored.sort(key=lambda s: (-s.score, s.index))
    return scored


def highlight(text: str, query: Sequence[Concept]) -> SafeString:
    """``text`` HTML-escaped, with every occurrence of a concept wrapped in ``<mark>``.

    Every piece of the input goes through ``escape``; only the ``<mark>`` tags are ours, so
    record text can never inject markup.
    """
    text = text or ""
    out: list[str] = []
    last = 0
    merged: list[tuple[int, int]] = []
    for start, end in spans(text, query):
        if merged and not text[merged[-1][1] : start].strip():
            merged[-1] = (merged[-1][0], end)  # "knee arthroplasty": one mark, not two
        else:
            merged.append((start, end))
    for start, end in merged:
        out.append(escape(text[last:start]))
        out.append(f"<mark>{escape(text[start:end])}</mark>")
        last = end
    out.append(escape(text[last:]))
    return mark_safe("".join(out))  # noqa: S308 - every fragment above is escaped


def snippet(text: str, query: Sequence[Concept], *, width: int = 320) -> tuple[str, bool]:
    """A window of ``text`` around its first match; and whether it was cut."""
    text = text or ""
    if len(text) <= width:
        return text, False
    found = spans(text, query, first=True)
    start = max(0, found[0][0] - width // 3) if found else 0
    end = min(len(text), start + width)
    start = max(0, end - width)
    # Cut at word boundaries so a highlighted word is never split.
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > end - 30 else end
    piece = text[start:end]
    return ("… " if start > 0 else "") + piece + (" …" if end < len(text) else ""), True
