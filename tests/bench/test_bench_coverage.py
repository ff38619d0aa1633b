"""``manage.py bench_coverage`` prints every cell's coverage, named plainly, and the verdict."""

import re

from django.core.management import call_command


def test_it_prints_each_cells_coverage_beside_the_method_before(capsys):
    call_command("bench_coverage", "--replicates", "30", "--family", "review", "--icc", "low")
    out = capsys.readouterr().out.splitlines()
    cells = [line for line in out if "30 replicates  " in line]
    # tau, difference and six shares, at 10, 15, 30 and 60 clusters.
    assert len(cells) == 8 * 4
    for line in cells:
        assert re.search(r"studentized cluster bootstrap: coverage \d+\.\d% width \d", line)
        assert re.search(r"before \(percentile\): coverage \d+\.\d%", line)
    assert any(line.startswith("tau ") and " 10 clusters" in line for line in cells)
    assert "within-patient correlation at ICC level 'low': tau " in "\n".join(out)
    (summary,) = [line for line in out if line.startswith("32 cells, 30 replicates each")]
    assert "lowest coverage" in summary and "mean coverage" in summary
    assert "target (no cell below 93.5%, mean at least 94.5%)" in summary
