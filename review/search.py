"""A small BM25 ranker and a safe highlighter for the record excerpt and record search.

Deliberately tiny: the excerpt ranks at most a few hundred candidate documents (recent notes and
distinct event names, chosen by the database), so an in-process BM25 is fast enough and needs no
search server. Nothing here touches the database.
"""

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

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


def highlight(text: str, terms: Iterable[str]) -> SafeString:
    """``text`` HTML-escaped, with words matching ``terms`` wrapped in ``<mark>``.

    Every piece of the input goes through ``escape``; only the ``<mark>`` tags are ours, so
    record text can never inject markup.
    """
    wanted = {normalize(t) for t in terms}
    out: list[str] = []
    last = 0
    text = text or ""
    if wanted:
        for match in _WORD.finditer(text):
            if normalize(match.group(0)) in wanted:
                out.append(escape(text[last : match.start()]))
                out.append(f"<mark>{escape(match.group(0))}</mark>")
                last = match.end()
    out.append(escape(text[last:]))
    return mark_safe("".join(out))  # noqa: S308 - every fragment above is escaped


def snippet(text: str, terms: Iterable[str], *, width: int = 320) -> tuple[str, bool]:
    """A window of ``text`` around its first matching term; and whether it was cut."""
    text = text or ""
    if len(text) <= width:
        return text, False
    wanted = {normalize(t) for t in terms}
    start = 0
    for match in _WORD.finditer(text):
        if normalize(match.group(0)) in wanted:
            start = max(0, match.start() - width // 3)
            break
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
