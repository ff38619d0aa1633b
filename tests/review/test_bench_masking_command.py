"""``manage.py bench_masking`` times every hostile response and prints the worst beside the
target and the raw library's scan (its figures go to docs/benchmarks.md, never into a test)."""

from django.core.management import call_command

from review.blinding_corpus import corpus


def test_it_prints_every_response_the_worst_case_and_the_target(capsys):
    call_command("bench_masking", "--repeats", "1")
    out = capsys.readouterr().out
    for case in corpus():
        assert case.name[:48] in out
    assert "raw RE2 ms" in out and "cold start" in out
    assert "worst case:" in out and "target < 5 ms at 10 kB" in out
