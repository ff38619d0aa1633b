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


def test_the_mimic_shaped_cohort_has_many_codes_and_stays_nested_in_admissions(tmp_path) -> None:
    import pyarrow.parquet as pq

    from review.management.commands.bench_import import write_mimic_bench

    root = write_mimic_bench(tmp_path / "mimic", 20_000)
    rows = pq.read_table(root / "data" / "0.parquet").to_pylist()
    timed = [r for r in rows if r["time"] is not None]
    assert abs(len(timed) - 20_000) <= 10  # about the size asked for
    assert len({r["subject_id"] for r in rows}) == 2  # ~9,000 rows a subject, as in MIMIC-IV
    assert len({r["code"] for r in rows}) > 500
    for sid in {r["subject_id"] for r in rows}:
        mine = [r for r in timed if r["subject_id"] == sid]
        assert [r["time"] for r in mine] == sorted(r["time"] for r in mine)
        codes = [r["code"] for r in mine]
        # The ED stay starts before the admission and ends inside it, before the discharge.
        ed, admit = (
            codes.index("ED_REGISTRATION"),
            codes.index("HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM"),
        )
        assert ed < admit < codes.index("ED_OUT") < codes.index("HOSPITAL_DISCHARGE//HOME")


def test_the_report_shows_the_bare_copy_rate_and_cpu_time() -> None:
    command = Command(stdout=StringIO())
    run = {**result(100_000, 2.0, 250), "bare_copy_seconds": 0.5, "cpu_s": 0.8, "db_cpu_s": 0.7}
    command._report(
        ["mimic"],
        [100_000],
        {"mimic": {100_000: [run]}},
        {"mimic": {100_000: 1e5}},
        {100_000: [1.0]},
    )
    out = command.stdout.getvalue()
    assert "200,000" in out  # bare COPY events/s
    assert "25%" in out  # the import's rate as a share of it
    assert "0.80+0.70" in out
