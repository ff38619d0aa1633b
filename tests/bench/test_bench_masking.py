"""``manage.py bench_masking`` times every hostile response against each response set of the
corpus and prints the worst beside the target and the raw library's scan (its figures go to
docs/benchmarks.md, never into a test). What is tested is that the verdict follows what was
measured: a masker made slow here is reported OVER, a fast one within."""

import re
import time

from django.core.management import call_command

from review import blinding
from tests.bench.masking_corpus import DATASETS, corpus

_ROW = re.compile(
    r"^(?P<label>.{48}) (?P<set>\S+)\s+\d+\s+\d+\s+[\d.]+\s+(?P<per>[\d.]+)\s+[\d.]+$"
)
_WORST = re.compile(r"worst case: ([\d.]+) ms per 10 kB \((.*)\); target < 5 ms at 10 kB: (\w+)")


def _bench(capsys) -> tuple[str, list[tuple[str, str, float]], tuple[float, str, str]]:
    call_command("bench_masking", "--repeats", "1")
    out = capsys.readouterr().out
    rows = [
        (m["label"].rstrip(), m["set"], float(m["per"]))
        for m in map(_ROW.match, out.splitlines())
        if m
    ]
    found = _WORST.search(out)
    assert found, out[-2000:]
    return out, rows, (float(found[1]), found[2], found[3])


def test_it_prints_every_response_of_every_set_the_worst_case_and_the_target(capsys):
    out, rows, _ = _bench(capsys)
    for label, models in DATASETS:
        assert f"masking against {len(models)} model names ({label})" in out
        for case in corpus():
            assert (case.name[:48], label) in {(r[0], r[1]) for r in rows}
    assert "raw RE2 ms" in out and "cold start" in out


def test_the_worst_case_is_the_largest_figure_measured(capsys):
    _, rows, (worst, where, verdict) = _bench(capsys)
    largest = max(rows, key=lambda r: r[2])
    assert worst == largest[2] and where.startswith(largest[0])
    assert verdict == ("within" if worst < 5 else "OVER")


def test_a_slow_masker_is_reported_over(capsys, monkeypatch):
    real = blinding.model_name_spans

    def slow_on_one_response(text, names=()):
        if text.startswith("GPT-4 GPT-4 "):  # "10 kB of 'GPT-4'"
            # Far above what any response costs on a loaded machine, so it is the worst case.
            time.sleep(0.3)
        return real(text, names)

    monkeypatch.setattr(blinding, "model_name_spans", slow_on_one_response)
    _, _, (worst, where, verdict) = _bench(capsys)
    assert verdict == "OVER" and worst >= 300.0 and where.startswith("10 kB of 'GPT-4'")


def test_a_fast_masker_is_reported_within(capsys, monkeypatch):
    monkeypatch.setattr(blinding, "model_name_spans", lambda text, names=(): [])
    _, _, (worst, _, verdict) = _bench(capsys)
    assert verdict == "within" and worst < 5
