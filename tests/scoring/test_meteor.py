"""METEOR (scoring.metrics.meteor) against NLTK's ``meteor_score`` called directly.

The independent check loads WordNet the way NLTK itself does (``nltk.corpus.wordnet`` found
under an ``nltk_data/corpora/wordnet`` folder on ``nltk.data.path``), from a copy of the same
WordNet files, and calls ``meteor_score`` with its defaults: the backend's own reader (Debian's
folder, which has no ``lexnames``) must give the same numbers. Hand-computed values check that
WordNet synonyms really take part.

Needs Debian's ``wordnet-base`` (``make wordnet``) for the tests that score; the unavailable path
runs everywhere. Django-free, like test_metrics.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scoring.metrics import BACKENDS, MetricUnavailable, Pair, get_backend
from scoring.metrics.meteor import WORDNET_FILES

REPO_ROOT = Path(__file__).resolve().parents[2]
WORDNET = Path(os.environ.get("METEOR_WORDNET_DIR") or "/usr/share/wordnet")
needs_wordnet = pytest.mark.skipif(
    not (WORDNET / "data.noun").is_file(),
    reason=f"no WordNet at {WORDNET}: install Debian's wordnet-base (make wordnet)",
)

SRC = "Summarise the note."
PAIRS = [
    # the guide/action example of NLTK's own doctest (0.6944 there)
    Pair(
        SRC,
        "It is a guide to action which ensures that the military always obeys the commands of "
        "the party",
        "It is a guide to action that ensures that the military will forever heed Party commands",
    ),
    Pair(SRC, "The patient is ill", "The patient is sick"),  # WordNet synonyms
    Pair(
        SRC,
        "The patient was admitted with pneumonia and started on IV antibiotics.",
        "Patient admitted with community-acquired pneumonia; intravenous antibiotics were started.",
    ),
    Pair(SRC, "Repeat the blood tests in two weeks.", "Repeat the blood tests in two weeks."),
    Pair(
        SRC,
        "Metformin, lisinopril and atorvastatin were continued; the doses were increased.",
        "She takes metformin 500 mg twice daily, lisinopril and atorvastatin; dose increased.",
    ),
    Pair(SRC, "Kidneys: creatinine rising, creatinine 2.1", "The creatinine rose to 2.1"),
    Pair(SRC, "Football club signs striker.", "No, the ECG was unremarkable."),
    Pair(SRC, "", "No known drug allergies."),
    Pair(SRC, "Nothing to add.", ""),
]


@pytest.fixture(autouse=True)
def _eager_celery():
    """Overrides tests/conftest.py's Django-only autouse fixture (see test_metrics.py)."""
    yield


@pytest.fixture(scope="module")
def stock_nltk_wordnet(tmp_path_factory):
    """``nltk.corpus.wordnet`` as NLTK loads it, over a copy of the same WordNet files laid out as
    ``nltk.download("wordnet")`` would (the WordNet 3.0 ``lexnames`` table of lexnames(5WN)
    written here when the source folder has none, as Debian's has not)."""
    import nltk

    root = tmp_path_factory.mktemp("nltk_data")
    target = root / "corpora" / "wordnet"
    target.mkdir(parents=True)
    for name in [*WORDNET_FILES, "lexnames", "index.sense", "cntlist.rev"]:
        if (WORDNET / name).is_file():
            shutil.copyfile(WORDNET / name, target / name)
    if not (target / "lexnames").exists():
        kinds = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
        names = [
            "adj.all",
            "adj.pert",
            "adv.all",
            "noun.Tops",
            "noun.act",
            "noun.animal",
            "noun.artifact",
            "noun.attribute",
            "noun.body",
            "noun.cognition",
            "noun.communication",
            "noun.event",
            "noun.feeling",
            "noun.food",
            "noun.group",
            "noun.location",
            "noun.motive",
            "noun.object",
            "noun.person",
            "noun.phenomenon",
            "noun.plant",
            "noun.possession",
            "noun.process",
            "noun.quantity",
            "noun.relation",
            "noun.shape",
            "noun.state",
            "noun.substance",
            "noun.time",
            "verb.body",
            "verb.change",
            "verb.cognition",
            "verb.communication",
            "verb.competition",
            "verb.consumption",
            "verb.contact",
            "verb.creation",
            "verb.emotion",
            "verb.motion",
            "verb.perception",
            "verb.possession",
            "verb.social",
            "verb.stative",
            "verb.weather",
            "adj.ppl",
        ]
        (target / "lexnames").write_text(
            "".join(f"{i:02d}\t{n}\t{kinds[n.split('.')[0]]}\n" for i, n in enumerate(names))
        )
    if not (target / "index.sense").exists():  # read only to map OMW versions, never by METEOR
        (target / "index.sense").write_text("")
    nltk.data.path.insert(0, str(root))
    try:
        from nltk.corpus import wordnet

        wordnet.ensure_loaded()
        assert Path(str(wordnet.root)).resolve() == target.resolve()
        yield wordnet
    finally:
        nltk.data.path.remove(str(root))


# --------------------------------------------------------------------------- registry


def test_meteor_is_a_registered_lexical_backend():
    assert BACKENDS["meteor"].kind == "lexical" and BACKENDS["meteor"].primary == "score"
    with pytest.raises(ValueError, match="wordnet"):
        get_backend("meteor", alpha=0.5)
    assert get_backend("meteor").score([]) == []  # nothing to score: WordNet is not loaded


def test_import_loads_neither_nltk_nor_wordnet():
    code = (
        "import sys, scoring.metrics as m; m.get_backend('meteor');"
        "bad = [x for x in ('nltk', 'nltk.corpus') if x in sys.modules]; assert not bad, bad"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT, env=env)


# --------------------------------------------------------------------------- unavailable


def test_without_wordnet_meteor_is_unavailable_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.delenv("METEOR_WORDNET_DIR", raising=False)
    missing = tmp_path / "no-wordnet"
    backend = get_backend("meteor", wordnet=str(missing))
    for call in (
        backend.check_available,
        backend.identity,
        backend.provenance,
        lambda: backend.score(PAIRS[:1]),
    ):
        with pytest.raises(MetricUnavailable) as exc:
            call()
        reason = str(exc.value)
        assert (
            str(missing) in reason and "wordnet-base" in reason and "METEOR_WORDNET_DIR" in reason
        )
        assert "download" in reason  # it says nothing is downloaded at run time

    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "data.noun").write_text("  1 This software and database ...\n")
    with pytest.raises(MetricUnavailable, match="index.noun"):
        get_backend("meteor", wordnet=str(partial)).check_available()


def test_the_wordnet_folder_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("METEOR_WORDNET_DIR", str(tmp_path / "elsewhere"))
    with pytest.raises(MetricUnavailable, match="elsewhere"):
        get_backend("meteor").check_available()
    monkeypatch.delenv("METEOR_WORDNET_DIR")
    assert get_backend("meteor").options["wordnet"] == "/usr/share/wordnet"  # Debian's


def test_an_unreadable_wordnet_is_unavailable_not_a_crash(tmp_path):
    """A folder with every file but not WordNet's content: loading fails with the reason."""
    bogus = tmp_path / "bogus"
    bogus.mkdir()
    for name in WORDNET_FILES:
        (bogus / name).write_text("not wordnet\n")
    backend = get_backend("meteor", wordnet=str(bogus))
    backend.check_available()  # the cheap check only looks for the files
    with pytest.raises(MetricUnavailable, match="could not be read"):
        backend.score(PAIRS[:1])


# --------------------------------------------------------------------------- values


@pytest.mark.slow
@needs_wordnet
def test_meteor_equals_nltk_meteor_score_called_directly(stock_nltk_wordnet):
    from nltk.translate.meteor_score import meteor_score

    got = get_backend("meteor", wordnet=str(WORDNET)).score(PAIRS)
    assert len(got) == len(PAIRS)
    for pair, value in zip(PAIRS, got, strict=True):
        # as MedAlign-style code calls it: NLTK's defaults, nltk.corpus.wordnet, whitespace tokens
        want = meteor_score([pair.reference.split()], pair.hypothesis.split())
        assert value == {"score": pytest.approx(want, abs=1e-12)}, pair
    scores = [v["score"] for v in got]
    assert round(scores[0], 4) == 0.6944  # NLTK's doctest value
    assert scores[3] == pytest.approx(1 - 0.5 * (1 / 7) ** 3)  # identical: 1 chunk of 7 words
    assert scores[-3:] == [0.0, 0.0, 0.0]  # nothing in common, empty hypothesis, empty reference


@pytest.mark.slow
@needs_wordnet
def test_wordnet_synonyms_count_as_matches():
    """ "ill" and "sick" share a WordNet synset (ill.a.01): all 4 words match in one chunk, so
    METEOR = 1 - 0.5 * (1/4)^3 = 0.9921875 by hand; with exact and stem matches only it would
    be 3 of 4 (F = 0.75, 1 chunk of 3): 0.75 * (1 - 0.5 / 27)."""
    backend = get_backend("meteor", wordnet=str(WORDNET))
    (synonym,) = backend.score([PAIRS[1]])
    assert synonym["score"] == pytest.approx(0.9921875, abs=1e-12)
    (plain,) = backend.score([Pair(SRC, "The patient is unwell today", "The patient is sick")])
    assert plain["score"] < synonym["score"]
    # case is folded (NLTK's str.lower preprocess), punctuation stays on its word (whitespace)
    (cased,) = backend.score([Pair(SRC, "THE PATIENT IS ILL", "the patient is sick")])
    assert cased["score"] == synonym["score"]
    (punct,) = backend.score([Pair(SRC, "The patient is ill.", "The patient is sick")])
    assert punct["score"] < synonym["score"]


@pytest.mark.slow
@needs_wordnet
def test_the_lexnames_table_matches_the_wordnet_it_is_given_to():
    """Debian's folder has no lexnames: the table supplied must name each synset's file as
    WordNet does (lex_filenum in the data files -> lexnames(5WN))."""
    wordnet = get_backend("meteor", wordnet=str(WORDNET))._wordnet()  # the reader METEOR uses
    assert {
        name: wordnet.synset(name).lexname()
        for name in ("dog.n.01", "run.v.01", "good.a.01", "well.r.01", "year.n.01", "rain.v.01")
    } == {
        "dog.n.01": "noun.animal",
        "run.v.01": "verb.motion",
        "good.a.01": "adj.all",
        "well.r.01": "adv.all",
        "year.n.01": "noun.time",
        "rain.v.01": "verb.weather",
    }
    assert wordnet.get_version() == "3.0"


@pytest.mark.slow
@needs_wordnet
def test_identity_and_provenance_name_nltk_and_the_wordnet(tmp_path):
    import hashlib

    backend = get_backend("meteor", wordnet=str(WORDNET))
    identity = backend.identity()
    assert identity["versions"] == {"nltk": "3.10.4"}
    assert identity["wordnet"]["version"] == "3.0"
    digest = hashlib.sha256()
    for name in sorted(identity["wordnet"]["files"]):
        digest.update(
            f"{name} {hashlib.sha256((WORDNET / name).read_bytes()).hexdigest()}\n".encode()
        )
    assert identity["wordnet"]["sha256"] == digest.hexdigest()
    assert set(WORDNET_FILES) <= set(identity["wordnet"]["files"])
    assert identity["options"] == {
        "tokenizer": "whitespace",
        "preprocess": "lowercase",
        "stemmer": "porter",
        "alpha": 0.9,
        "beta": 3.0,
        "gamma": 0.5,
    }
    assert identity["location"]["wordnet_dir"] == str(WORDNET)

    # the same files elsewhere hash the same; other content does not
    copy = tmp_path / "wordnet"
    copy.mkdir()
    for name in identity["wordnet"]["files"]:
        shutil.copyfile(WORDNET / name, copy / name)
    assert get_backend("meteor", wordnet=str(copy)).identity_hash() == backend.identity_hash()
    with (copy / "noun.exc").open("a") as fh:
        fh.write("geese goose\n")
    assert get_backend("meteor", wordnet=str(copy)).identity_hash() != backend.identity_hash()

    prov = backend.provenance()
    assert prov["metric"] == "meteor" and prov["model"] == "WordNet 3.0"
    assert prov["weights_sha256"] == identity["wordnet"]["sha256"]
    assert prov["tokenizer"] == "whitespace" and prov["stemming"] is True
    assert prov["library_versions"] == {"nltk": "3.10.4"}
    if shutil.which("dpkg-query") and str(WORDNET) == "/usr/share/wordnet":
        assert prov["model_source"] == "package"
        assert prov["wordnet_source"].startswith("Debian package wordnet-base ")
    assert get_backend("meteor", wordnet=str(copy)).provenance()["wordnet_source"] == (
        "local folder wordnet"
    )
