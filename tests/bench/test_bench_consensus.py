"""``manage.py bench_consensus`` prints each consensus's recovery and every clinician's
estimated reliability beside the true one; the latent-class models find the order."""

import re

from django.core.management import call_command


def test_it_recovers_clinicians_of_known_reliability(capsys):
    call_command("bench_consensus", "--instructions", "300", "--seed", "1")
    out = capsys.readouterr().out
    rows = re.findall(r"^\s+(\d)\s+(0\.\d\d)\s+(\d\.\d\d), (\d\.\d\d)", out, re.M)
    assert len(rows) == 6
    true = [float(r[1]) for r in rows]
    dawid_skene = [float(r[2]) for r in rows]
    # Dawid-Skene's reliability on verdicts estimates each clinician's accuracy.
    assert max(abs(a - b) for a, b in zip(true, dawid_skene, strict=True)) < 0.08
    for name in ("Dawid-Skene", "MACE"):
        (tau,) = re.findall(rf"^{name}: .*Kendall's tau (-?\d\.\d\d)", out, re.M)
        assert float(tau) >= 0.8, out
        (error,) = re.findall(rf"^{name}: .*: (\d\.\d\d)$", out, re.M)
        assert float(error) < 0.1, out
    right = dict(re.findall(r"^(\w+)\s+verdicts right\s+(\d+\.\d)%", out, re.M))
    assert float(right["dawid_skene"]) > float(right["majority"])
