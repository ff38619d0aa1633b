"""Regular expressions over text the app does not control, in time linear in the text.

Model output, imported records, generated text and a judge's or grader's reply are hostile
input: Python's ``re`` backtracks, and one crafted response can hold a worker for minutes. A
``Pattern`` here is compiled by RE2 (``google-re2``), whose matching time is linear in the text
whatever the pattern. RE2 has no lookaround and no backreferences: a pattern that needs them
does not compile, and must be restructured (a bounded check in Python after the match).

Differences from ``re`` a caller must know:
- ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII in RE2. ``WORD``, ``DIGIT`` and ``SPACE`` below
  are Python's Unicode classes (``str.isalnum`` or "_", ``str.isdecimal``, ``str.isspace``).
- A lone surrogate (valid in a ``str``, not in UTF-8) is matched as U+FFFD, one character for
  one, so every offset still indexes the text given, and a group is read from that text.
- ``flags`` are the inline ones: ``(?i)`` ignore case, ``(?s)`` dot matches a newline, ``(?m)``
  ``^``/``$`` at lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import re2
from re2 import _re2

WORD = r"[\pL\pN_]"
DIGIT = r"\p{Nd}"
SPACE = r"[\t\n\x0b\f\r\x1c-\x1f \x85\p{Z}]"

_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), 0xFFFD)

# Big alternations (every model name of a dataset) need more than RE2's default 8 MiB.
_OPTIONS = re2.Options()
_OPTIONS.max_mem = 64 << 20


_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
_START = _re2.RE2.Anchor.ANCHOR_START
_BOTH = _re2.RE2.Anchor.ANCHOR_BOTH


class Match(Protocol):
    def group(self, group: int = 0) -> str: ...
    def start(self, group: int = 0) -> int: ...
    def end(self, group: int = 0) -> int: ...
    def span(self, group: int = 0) -> tuple[int, int]: ...
    def groups(self, default: str | None = None) -> tuple[str | None, ...]: ...


def encodable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD: same length, valid UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.translate(_SURROGATES)
    return text


class _OnOriginal:
    """A match found in the cleaned copy of a text with lone surrogates, read from the text
    itself (same offsets), so a group holds what was written."""

    __slots__ = ("_match", "_text")

    def __init__(self, match: Match, text: str) -> None:
        self._match = match
        self._text = text

    def group(self, group: int = 0) -> str:
        start, end = self._match.span(group)
        return None if start < 0 else self._text[start:end]  # type: ignore[return-value]

    def start(self, group: int = 0) -> int:
        return self._match.start(group)

    def end(self, group: int = 0) -> int:
        return self._match.end(group)

    def span(self, group: int = 0) -> tuple[int, int]:
        return self._match.span(group)

    def groups(self, default: str | None = None) -> tuple[str | None, ...]:
        count = len(self._match.groups())
        return tuple(self.group(i) if self.start(i) >= 0 else default for i in range(1, count + 1))


class Pattern:
    """A compiled RE2 pattern with the part of ``re.Pattern``'s interface the app uses."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._re = re2.compile(pattern, _OPTIONS)

    @property
    def groups(self) -> int:
        return int(self._re.groups)

    def _found(self, found: Match | None, text: str, clean: str) -> Match | None:
        if found is None or clean is text:
            return found
        return _OnOriginal(found, text)

    def search(self, text: str, pos: int = 0) -> Match | None:
        clean = encodable(text)
        return self._found(self._re.search(clean, pos), text, clean)

    def match(self, text: str, pos: int = 0) -> Match | None:
        clean = encodable(text)
        return self._found(self._re.match(clean, pos), text, clean)

    def fullmatch(self, text: str) -> Match | None:
        clean = encodable(text)
        return self._found(self._re.fullmatch(clean), text, clean)

    def finditer(self, text: str) -> Iterator[Match]:
        clean = encodable(text)
        for found in self._re.finditer(clean):
            yield found if clean is text else _OnOriginal(found, text)

    def findall(self, text: str) -> list[str]:
        """Like ``re.findall`` for a pattern of at most one group."""
        assert self.groups <= 1, "findall of several groups is not needed here"
        return [m.group(self.groups) or "" for m in self.finditer(text)]

    def sub(self, repl: str | Callable[[Match], str], text: str, count: int = 0) -> str:
        """Like ``re.sub``; a string ``repl`` is taken literally (no group references)."""
        parts: list[str] = []
        last = 0
        for done, m in enumerate(self.finditer(text)):
            if count and done >= count:
                break
            start, end = m.span()
            parts.append(text[last:start])
            parts.append(repl(m) if callable(repl) else repl)
            last = end
        parts.append(text[last:])
        return "".join(parts)


class BytesPattern:
    """A compiled RE2 pattern over bytes, each byte one character (RE2's Latin-1 mode, as
    ``re`` reads a bytes pattern), for callers that match many times over one text.

    It calls the binding's C++ ``RE2`` object itself: google-re2's Python layer adds a generator
    and a match object to every call, which costs more than the match on a dense response
    (google-re2 is pinned). Spans only, unless ``groups``: then ``group_spans`` gives each
    group's span too.
    """

    def __init__(self, pattern: bytes, *, groups: bool = False) -> None:
        self.pattern = pattern
        options = re2.Options()
        options.max_mem = _OPTIONS.max_mem
        options.encoding = re2.Options.Encoding.LATIN1
        options.never_capture = not groups
        self._raw = _re2.RE2(pattern, options)
        if not self._raw.ok():
            raise re2.error(self._raw.error())

    def search(
        self, data: bytes, pos: int = 0, endpos: int | None = None
    ) -> tuple[int, int] | None:
        """The span of the leftmost match in ``data[pos:endpos]``; ``\\b``, ``^`` and ``$`` see
        the bytes around that window (``$`` never matches at a window's end)."""
        span = self._raw.Match(_UNANCHORED, data, pos, len(data) if endpos is None else endpos)[0]
        return None if span[0] < 0 else span

    def match(self, data: bytes, pos: int = 0, endpos: int | None = None) -> tuple[int, int] | None:
        """The span of a match that starts at ``pos``."""
        span = self._raw.Match(_START, data, pos, len(data) if endpos is None else endpos)[0]
        return None if span[0] < 0 else span

    def fullmatch(self, data: bytes, pos: int = 0, endpos: int | None = None) -> bool:
        """Whether ``data[pos:endpos]`` matches whole."""
        end = len(data) if endpos is None else endpos
        return bool(self._raw.Match(_BOTH, data, pos, end)[0][0] >= 0)

    def spans(self, data: bytes, pos: int = 0) -> Iterator[tuple[int, int]]:
        """Every match's span, left to right, none overlapping."""
        size = len(data)
        match = self._raw.Match
        while pos <= size:
            span = match(_UNANCHORED, data, pos, size)[0]
            if span[0] < 0:
                return
            yield span
            pos = span[1] if span[1] > span[0] else span[1] + 1

    def group_spans(self, data: bytes, pos: int = 0) -> Iterator[list[tuple[int, int]]]:
        """Every match's span and its groups' (``(-1, -1)`` for a group that took no part),
        left to right, none overlapping."""
        size = len(data)
        match = self._raw.Match
        while pos <= size:
            spans: list[tuple[int, int]] = match(_UNANCHORED, data, pos, size)
            start, end = spans[0]
            if start < 0:
                return
            yield spans
            pos = end if end > start else end + 1


class BytesSet:
    """Several RE2 patterns over bytes matched at once: which of them match all of a text."""

    def __init__(self, patterns: list[bytes]) -> None:
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        self._set = _re2.Set(_BOTH, options)
        for pattern in patterns:
            if self._set.Add(pattern) < 0:
                raise re2.error(f"cannot add {pattern!r}")
        if not self._set.Compile():
            raise re2.error("cannot compile the set")

    def fullmatches(self, data: bytes) -> frozenset[int]:
        """The indexes of the patterns that match ``data`` whole."""
        return frozenset(self._set.Match(data))
