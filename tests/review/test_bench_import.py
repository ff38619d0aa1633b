"""bench_import's report: medians, the ratio to XML and the verdicts (figures made up here)."""

from io import StringIO

from review.management.commands.bench_import import Command


def result(events: int, seconds: float, peak: float) -> dict[str, float]:
    return {"events": events, "seconds": seconds, "peak_mb": peak, "rss_before_mb": 200.0}


def test_the_report_takes_medians_and_compares_each_format_with_xml_at_the_same_size() -> None:
    command = Command(stdout=StringIO())
    results = {
        # XML: medians 10 s and 100 s; one slow outlier each that a mean would have counted.
        "xml": {
            1000: [result(1000, 10, 200), result(1000, 10, 200), result(1000, 50, 200)],
            10000: [result(10000, 100, 210), result(10000, 100, 210), result(10000, 400, 210)],
        },
        # MEDS: twice XML's rate at both sizes, memory flat.
        "meds": {
            1000: [result(1000, 5, 220), result(1000, 5, 220), result(1000, 6, 220)],
            10000: [result(10000, 50, 230), result(10000, 50, 230), result(10000, 40, 230)],
        },
        # OMOP: faster at the small size, slower at the large one, memory grows 1.5x.
        "omop": {
            1000: [result(1000, 5, 200), result(1000, 5, 200), result(1000, 5, 200)],
            10000: [result(10000, 200, 300), result(10000, 200, 300), result(10000, 200, 300)],
        },
    }
    baselines = {fmt: {1000: 1e5, 10000: 1e5} for fmt in results}
    loads = {1000: [1.0, 2.5], 10000: [3.0, 4.0]}

    command._report(["xml", "meds", "omop"], [1000, 10000], results, baselines, loads)
    out = command.stdout.getvalue()

    assert "meds: events/s vs XML (median of each) at each size: 2.00x, 2.00x" in out
    assert "(target >= 1.00x: met)" in out
    assert "omop: events/s vs XML (median of each) at each size: 2.00x, 0.50x" in out
    assert "(target >= 1.00x: NOT met)" in out
    assert "meds: peak memory at 10,000 / 1,000 events: 1.05x (target <= 1.2x: met)" in out
    assert "omop: peak memory at 10,000 / 1,000 events: 1.50x (target <= 1.2x: NOT met)" in out
    assert "xml: slowest median import 100 events/s" in out
    # The largest size's peak against XML's at that size (the bar the issue set).
    assert "meds: peak memory at 10,000 events vs XML's: 1.10x (target <= 1.2x: met)" in out
    assert "omop: peak memory at 10,000 events vs XML's: 1.43x (target <= 1.2x: NOT met)" in out
    assert "3.0-4.0" in out  # the load average while each size ran
