"""Benchmark the EHR importers: events/s and peak memory for inputs of growing size.

For each size it writes a synthetic input per format, then imports each in a fresh child process
(so peak RSS belongs to that import alone), ``--repeats`` times, the formats alternating (each
repeat starts with the next format) so that a busy spell on a shared machine does not land on
one format; medians are reported, with the ratio to the XML importer's events/s at the same size
and the load average while it ran. The same inputs are read with the bare library as the
baseline: an ``<eventstream>`` record with ``lxml.etree.iterparse``; a MEDS cohort (1,000 events
a subject) with pyarrow's ``iter_batches``; OMOP CDM CSV tables (person, visits, concept,
measurement, note) with pyarrow's streaming CSV reader.
"""

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, transaction
from lxml import etree

from review.demo.synthetic import make_patient, write_eventstream
from review.importers import import_release
from review.models import Dataset, Encounter, Event, Patient
from tests.bench.procinfo import peak_rss_mb

DATASET = "bench-import"


class Command(BaseCommand):
    help = (
        "Time the EHR importers (XML, MEDS, OMOP) on 10k/100k/1M-event inputs, back to back: "
        "events/s, the ratio to the XML importer's, and peak memory."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--sizes", default="10000,100000,1000000", help="event counts, for every format"
        )
        parser.add_argument(
            "--formats",
            default="xml,meds,mimic,omop",
            help="xml; meds (1,000 events a subject); mimic (MEDS, MIMIC-IV's shape); omop",
        )
        parser.add_argument(
            "--repeats",
            type=int,
            default=3,
            help="imports per format and size, alternating formats; medians are reported",
        )
        parser.add_argument("--child", type=Path, help=argparse_hidden())
        parser.add_argument("--keep", action="store_true", help="keep the bench dataset")

    def handle(self, *args: object, **options: object) -> None:
        if options["child"]:
            self._child(Path(options["child"]))  # type: ignore[arg-type]
            return
        sizes = [int(s) for s in str(options["sizes"]).split(",")]
        formats = [f for f in str(options["formats"]).split(",") if f]
        unknown = set(formats) - set(WRITERS)
        if unknown:
            raise SystemExit(f"unknown format(s): {', '.join(sorted(unknown))}")
        repeats = max(1, int(options["repeats"]))  # type: ignore[call-overload]
        self.stdout.write(
            f"database: {connection.vendor}; python {sys.version.split()[0]}; "
            f"{os.cpu_count()} cores; {repeats} repeat(s), formats alternating"
        )
        # results[fmt][size] = list of child results; baselines[fmt][size] = library-only ev/s
        results: dict[str, dict[int, list[dict[str, float]]]] = {f: {} for f in formats}
        baselines: dict[str, dict[int, float]] = {f: {} for f in formats}
        loads: dict[int, list[float]] = {}
        if not options["keep"]:
            _drop_bench_dataset()  # a table left by an earlier run starts as new, too
        for size in sizes:
            with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
                inputs = {}
                for fmt in formats:
                    inputs[fmt] = WRITERS[fmt](Path(tmp) / fmt, size)
                    baselines[fmt][size] = BASELINES[fmt](inputs[fmt])
                loads[size] = [os.getloadavg()[0]]
                for repeat in range(repeats):
                    # Each repeat starts with the next format: none always runs first or last.
                    order = formats[repeat % len(formats) :] + formats[: repeat % len(formats)]
                    for fmt in order:
                        results[fmt].setdefault(size, []).append(_run_child(inputs[fmt]))
                        if not options["keep"]:
                            _drop_bench_dataset()
                        loads[size].append(os.getloadavg()[0])
            self.stdout.write(
                f"  {size:,} events done; load average (1 min) during: "
                f"{min(loads[size]):.1f}-{max(loads[size]):.1f}"
            )
        self._report(formats, sizes, results, baselines, loads)

    def _report(
        self,
        formats: list[str],
        sizes: list[int],
        results: dict[str, dict[int, list[dict[str, float]]]],
        baselines: dict[str, dict[int, float]],
        loads: dict[int, list[float]],
    ) -> None:
        def rate(result: dict[str, float]) -> float:
            return result["events"] / result["seconds"]

        self.stdout.write(
            f"{'format':<6} {'events':>9} {'import s':>9} {'events/s':>10} {'vs XML':>7} "
            f"{'library-only ev/s':>18} {'bare COPY ev/s':>15} {'of COPY':>8} "
            f"{'CPU s (py+db)':>14} {'peak RSS MB':>12} {'vs smallest':>12} {'load':>9}"
        )
        for fmt in formats:
            smallest_peak = None
            for size in sizes:
                runs = results[fmt][size]
                seconds = statistics.median(r["seconds"] for r in runs)
                events_per_s = statistics.median(rate(r) for r in runs)
                peak = max(r["peak_mb"] for r in runs)
                smallest_peak = smallest_peak or peak
                versus = ""
                if fmt != "xml" and "xml" in results:
                    xml_rate = statistics.median(rate(r) for r in results["xml"][size])
                    versus = f"{events_per_s / xml_rate:.2f}x"
                load = f"{min(loads[size]):.1f}-{max(loads[size]):.1f}"
                # PostgreSQL's own bulk-load rate for the same rows, measured in the same child
                # right after the import, and the import's events/s as a share of it.
                bare = [
                    r["events"] / r["bare_copy_seconds"] for r in runs if "bare_copy_seconds" in r
                ]
                copy_rate = f"{statistics.median(bare):,.0f}" if bare else ""
                of_copy = f"{events_per_s / statistics.median(bare):.0%}" if bare else ""
                cpu = ""
                if all("cpu_s" in r for r in runs):
                    py = statistics.median(r["cpu_s"] for r in runs)
                    db = [r["db_cpu_s"] for r in runs if "db_cpu_s" in r]
                    cpu = f"{py:.2f}+{statistics.median(db):.2f}" if db else f"{py:.2f}"
                self.stdout.write(
                    f"{fmt:<6} {int(runs[0]['events']):>9,} {seconds:>9.2f} {events_per_s:>10,.0f} "
                    f"{versus:>7} {baselines[fmt][size]:>18,.0f} {copy_rate:>15} {of_copy:>8} "
                    f"{cpu:>14} {peak:>12.0f} {peak / smallest_peak:>11.2f}x {load:>9}"
                )
        self.stdout.write("targets:")
        for fmt in formats:
            peaks = [max(r["peak_mb"] for r in results[fmt][size]) for size in sizes]
            ratio = max(peaks) / peaks[0]
            self.stdout.write(
                f"  {fmt}: peak memory at {sizes[-1]:,} / {sizes[0]:,} events: {ratio:.2f}x "
                f"(target <= 1.2x: {'met' if ratio <= 1.2 else 'NOT met'})"
            )
            if fmt != "xml" and "xml" in results:
                xml_peak = max(r["peak_mb"] for r in results["xml"][sizes[-1]])
                versus_xml = peaks[-1] / xml_peak
                self.stdout.write(
                    f"  {fmt}: peak memory at {sizes[-1]:,} events vs XML's: {versus_xml:.2f}x "
                    f"(target <= 1.2x: {'met' if versus_xml <= 1.2 else 'NOT met'})"
                )
                ratios = [
                    statistics.median(rate(r) for r in results[fmt][size])
                    / statistics.median(rate(r) for r in results["xml"][size])
                    for size in sizes
                ]
                shown = ", ".join(f"{r:.2f}x" for r in ratios)
                verdict = "met" if min(ratios) >= 1.0 else "NOT met"
                self.stdout.write(
                    f"  {fmt}: events/s vs XML (median of each) at each size: {shown} "
                    f"(target >= 1.00x: {verdict})"
                )
        if "xml" in results:
            slowest = min(
                statistics.median(rate(r) for r in results["xml"][size]) for size in sizes
            )
            self.stdout.write(
                f"  xml: slowest median import {slowest:,.0f} events/s "
                "(target >= 20,000 on PostgreSQL)"
            )

    def _child(self, path: Path) -> None:
        # Every format's import loads the MEDS and OMOP modules (pyarrow, meds) on first use;
        # loaded before the clock starts, as in a running server, so that fixed cost (about a
        # second on this machine) does not blur the formats' rates at 10,000 events.
        from review.importers import meds, omop  # noqa: F401

        rss_before = peak_rss_mb() or 0.0
        backend = _backend_cpu_seconds()
        cpu = time.process_time()
        start = time.perf_counter()
        summary = import_release(path, dataset_name=DATASET, replace=True)
        seconds = time.perf_counter() - start
        result = {
            "events": summary.counts["events"],
            "seconds": seconds,
            "rss_before_mb": rss_before,
            "peak_mb": (peak_rss_mb() or 0.0),
            # CPU time, which other work on a shared machine inflates far less than wall time.
            "cpu_s": time.process_time() - cpu,
        }
        backend_after = _backend_cpu_seconds()
        if backend is not None and backend_after is not None:
            result["db_cpu_s"] = backend_after - backend
        if connection.vendor == "postgresql":
            result["bare_copy_seconds"] = _bare_copy_seconds()
        self.stdout.write(json.dumps(result))


def _drop_bench_dataset() -> None:
    """Delete the bench dataset, so that every import starts from the same table. On PostgreSQL
    a plain VACUUM is not enough for that: the deleted rows' pages and index pages stay
    allocated, and code that maintains indexes row by row grows slower run after run, so two
    versions compared on tables in different states would be compared unfairly.
    When nothing else is left in the tables, VACUUM FULL gives them back their new size, as in
    a new installation; when other datasets are there (a shared database), a plain VACUUM."""
    Dataset.objects.filter(name=DATASET).delete()
    if connection.vendor != "postgresql":
        return
    tables = f"{Event._meta.db_table}, {Encounter._meta.db_table}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {Event._meta.db_table}) "  # noqa: S608 - models' tables
            f"OR EXISTS (SELECT 1 FROM {Encounter._meta.db_table})"
        )
        (others,) = cursor.fetchone()
        cursor.execute(f"VACUUM {tables}" if others else f"VACUUM FULL {tables}")


def _backend_cpu_seconds() -> float | None:
    """CPU seconds this connection's PostgreSQL backend has used (a server on this machine;
    None otherwise). Parallel index-build workers are separate processes, not counted."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _bare_copy_seconds() -> float:
    """Seconds PostgreSQL takes to COPY the rows just imported (binary, as the importers send
    them) into a table with no index, constraint or trigger: the bulk-load rate the imports are
    measured against. The rows go to a temporary file first, and only the load is timed."""
    from review.importers.writers import EVENT_COLUMNS

    columns = ", ".join(EVENT_COLUMNS)
    table = Event._meta.db_table
    dataset = Dataset.objects.get(name=DATASET)
    with tempfile.TemporaryFile() as fh, connection.cursor() as cursor:
        raw = cursor.cursor
        select = (
            f"SELECT {', '.join('e.' + c for c in EVENT_COLUMNS)} FROM {table} e "  # noqa: S608
            f"JOIN {Patient._meta.db_table} p ON p.id = e.patient_id "
            f"WHERE p.dataset_id = {int(dataset.pk)}"
        )
        with raw.copy(f"COPY ({select}) TO STDOUT (FORMAT BINARY)") as copy:
            for data in copy:
                fh.write(data)
        fh.seek(0)
        with transaction.atomic():
            cursor.execute(
                f"CREATE TEMPORARY TABLE bench_bare ON COMMIT DROP AS "  # noqa: S608
                f"SELECT {columns} FROM {table} WITH NO DATA"
            )
            start = time.perf_counter()
            with raw.copy(f"COPY bench_bare ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                while data := fh.read(1 << 20):
                    copy.write(data)
            return time.perf_counter() - start


def _lxml_baseline(path: Path) -> float:
    """Events/s for lxml's iterparse alone over the same file (clearing as it goes)."""
    start = time.perf_counter()
    n = 0
    for _, elem in etree.iterparse(str(path), events=("end",), tag="event"):
        n += 1
        elem.clear()
    return n / (time.perf_counter() - start)


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


# --- MEDS and OMOP ------------------------------------------------------------------------------
EVENTS_PER_SUBJECT = 1_000


def _run_child(path: Path) -> dict[str, float]:
    proc = subprocess.Popen(  # noqa: S603 - our own manage.py
        [sys.executable, "manage.py", "bench_import", "--child", str(path)],
        cwd=settings.BASE_DIR,
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    if proc.wait() != 0:
        raise SystemExit(f"the import child failed with status {proc.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1])


def write_xml_bench(root: Path, n_events: int) -> Path:
    """One ``<eventstream>`` record of ``n_events`` events (the demo's generator)."""
    root.mkdir(parents=True)
    path = root / "8000000.xml"
    write_eventstream(make_patient(random.Random(n_events), 0, n_events, "eventstream"), path)
    return path


def write_meds_bench(root: Path, n_events: int) -> Path:
    """A MEDS cohort of ``n_events`` timed events, 1,000 a subject: a visit code every 50
    events, a radiology impression every 100, lab values otherwise; written in 100k-row groups."""
    import meds
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "data").mkdir(parents=True)
    (root / "metadata").mkdir()
    labs = np.array(["LOINC/8867-4", "LOINC/2951-2", "LOINC/2160-0", "LOINC/718-7"])
    schema = meds.DataSchema.schema()
    with pq.ParquetWriter(root / "data" / "0.parquet", schema) as writer:
        for start in range(0, n_events, 100_000):
            index = np.arange(start, min(start + 100_000, n_events))
            within = index % EVENTS_PER_SUBJECT
            codes = labs[index % len(labs)].astype(object)
            codes[within % 50 == 0] = "VISIT/OP"
            codes[within % 100 == 99] = "RADIOLOGY//CT_CHEST//IMPRESSION"
            numeric = np.where(within % 50 == 0, np.nan, (index % 97) + 0.5).astype(np.float32)
            text = np.where(within % 100 == 99, "No acute cardiopulmonary process.", None)
            minutes = (within * 37).astype("timedelta64[m]")
            times = np.datetime64("2015-01-01T08:00", "us") + minutes
            batch = pa.table(
                {
                    "subject_id": pa.array(1_000_000 + index // EVENTS_PER_SUBJECT, pa.int64()),
                    "time": pa.array(times, pa.timestamp("us")),
                    "code": pa.array(codes.tolist(), pa.string()),
                    "numeric_value": pa.array(numeric, pa.float32(), mask=np.isnan(numeric)),
                    "text_value": pa.array(text.tolist(), pa.large_string()),
                },
                schema=schema,
            )
            writer.write_table(batch, row_group_size=100_000)
    pq.write_table(
        pa.table({"code": labs.tolist(), "description": ["HR", "Na", "Creat", "Hb"]}),
        root / "metadata" / "codes.parquet",
    )
    return root


def write_omop_bench(root: Path, n_events: int) -> Path:
    """OMOP CSV tables: ``n_events`` measurements and notes, 1,000 a person, a visit per 50."""
    import csv
    from datetime import datetime, timedelta

    root.mkdir(parents=True)
    persons = max(1, n_events // EVENTS_PER_SUBJECT)
    with (root / "concept.csv").open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["concept_id", "concept_name", "vocabulary_id", "concept_code"])
        out.writerows(
            [
                [3027018, "Heart rate", "LOINC", "8867-4"],
                [3019550, "Sodium", "LOINC", "2951-2"],
                [9202, "Outpatient Visit", "Visit", "OP"],
                [8507, "MALE", "Gender", "M"],
                [8541, "per minute", "UCUM", "/min"],
            ]
        )
    with (root / "person.csv").open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["person_id", "gender_concept_id", "year_of_birth"])
        out.writerows([p, 8507, 1950] for p in range(1, persons + 1))
    start = datetime(2015, 1, 1, 8)
    with (root / "visit_occurrence.csv").open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["visit_occurrence_id", "person_id", "visit_concept_id", "visit_start_date"])
        for v in range(n_events // 50):
            person = v * 50 // EVENTS_PER_SUBJECT + 1
            out.writerow([v + 1, person, 9202, (start + timedelta(days=v % 20)).date()])
    with (
        (root / "measurement.csv").open("w", newline="") as m_fh,
        (root / "note.csv").open("w", newline="") as n_fh,
    ):
        m_out, n_out = csv.writer(m_fh), csv.writer(n_fh)
        m_out.writerow(
            ["measurement_id", "person_id", "measurement_concept_id", "measurement_date"]
            + ["measurement_datetime", "value_as_number", "unit_concept_id", "visit_occurrence_id"]
        )
        n_out.writerow(["note_id", "person_id", "note_date", "note_title", "note_text"])
        for e in range(n_events):
            person = e // EVENTS_PER_SUBJECT + 1
            when = start + timedelta(minutes=37 * (e % EVENTS_PER_SUBJECT))
            if e % 100 == 99:
                n_out.writerow([e, person, when.date(), "CT chest", "No acute process."])
                continue
            concept = 3027018 if e % 2 else 3019550
            m_out.writerow([e, person, concept, when.date(), when, e % 97, 8541, e // 50 + 1])
    return root


def _meds_baseline(root: Path) -> float:
    import pyarrow.parquet as pq

    start = time.perf_counter()
    n = 0
    for shard in sorted((root / "data").glob("*.parquet")):
        for batch in pq.ParquetFile(shard).iter_batches(batch_size=65_536):
            for name in batch.schema.names:
                batch.column(name).to_pylist()
            n += batch.num_rows
    return n / (time.perf_counter() - start)


def _omop_baseline(root: Path) -> float:
    from review.importers.omop import iter_batches

    start = time.perf_counter()
    n = 0
    for name in ("measurement", "note"):
        for batch in iter_batches(root / f"{name}.csv"):
            for column in batch.schema.names:
                batch.column(column).to_pylist()
            n += batch.num_rows
    return n / (time.perf_counter() - start)


# --- A MEDS cohort of MIMIC-IV's shape ------------------------------------------------------
# About 9,000 rows a subject (MIMIC-IV's demo in MEDS: 916,166 rows for 100 subjects), a few
# thousand distinct codes, lab panels (many rows at one time), and hospital admissions with
# nested stays: an ED stay that starts before the admission and ends inside it (``ED_OUT``),
# an ICU stay inside it, transfers; outpatient labs between admissions (no visit code).
MIMIC_ROWS_PER_SUBJECT = 9_000
MIMIC_LAB_CODES = 900
MIMIC_DRUG_CODES = 1_500
MIMIC_DIAGNOSIS_CODES = 3_000
MIMIC_PROCEDURE_CODES = 400


def _mimic_subject(rng: random.Random, budget: int) -> list[tuple]:
    """One subject's rows (time, code, numeric, text), in time order, about ``budget`` of them."""
    from datetime import datetime, timedelta

    birth = datetime(1940, 1, 1) + timedelta(days=rng.randrange(20_000))
    rows: list[tuple] = [(birth, "MEDS_BIRTH", None, None)]
    labs = [f"LAB//{50_800 + rng.randrange(MIMIC_LAB_CODES)}//mg/dL" for _ in range(40)]
    when = datetime(2110, 1, 1) + timedelta(days=rng.randrange(3_000))
    admissions = max(1, round(budget / 3_300))
    per_stay = budget // admissions
    for _ in range(admissions):
        # Outpatient labs a few days before: no visit code, grouped by day.
        out_day = when - timedelta(days=rng.randrange(3, 30))
        for lab in rng.sample(labs, 6):
            rows.append((out_day, lab, round(rng.uniform(0.5, 150), 1), None))
        ed = when
        admit = ed + timedelta(hours=rng.randrange(2, 6))
        ed_out = admit + timedelta(hours=rng.randrange(1, 4))
        rows += [
            (ed, "ED_REGISTRATION", None, None),
            (ed + timedelta(minutes=10), "TRANSFER_TO//ED//Emergency Department", None, None),
            (admit, "HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM", None, None),
            (admit, "TRANSFER_TO//admit//Medicine", None, None),
            (ed_out, "ED_OUT", None, None),
        ]
        t = ed + timedelta(minutes=15)
        icu_in = admit + timedelta(hours=rng.randrange(6, 30))
        icu_out = icu_in + timedelta(hours=rng.randrange(24, 96))
        rows += [
            (icu_in, "ICU_ADMISSION//Medical Intensive Care Unit (MICU)", None, None),
            (icu_out, "ICU_DISCHARGE//Medical Intensive Care Unit (MICU)", None, None),
        ]
        made = 0
        while made < per_stay - 40:
            kind = rng.random()
            if kind < 0.55:  # a lab panel: several results at one time
                for lab in rng.sample(labs, 8):
                    rows.append((t, lab, round(rng.uniform(0.5, 150), 1), None))
                made += 8
            elif kind < 0.8:  # vitals
                rows.append((t, "LAB//220045//bpm", float(rng.randrange(50, 130)), None))
                rows.append((t, "LAB//220210//insp/min", float(rng.randrange(10, 30)), None))
                made += 2
            elif kind < 0.95:
                drug = rng.randrange(MIMIC_DRUG_CODES)
                rows.append((t, f"MEDICATION//DRUG{drug}//Administered", None, None))
                made += 1
            else:  # a categorical result
                rows.append((t, f"LAB//{51_400 + rng.randrange(50)}//UNK", None, "NEG"))
                made += 1
            t += timedelta(minutes=rng.randrange(5, 90))
        discharge = max(t, icu_out) + timedelta(hours=2)
        rows.append((discharge, "HOSPITAL_DISCHARGE//HOME", None, None))
        for _ in range(25):
            code = f"DIAGNOSIS//ICD//10//D{rng.randrange(MIMIC_DIAGNOSIS_CODES):04d}"
            rows.append((discharge, code, None, None))
        for _ in range(5):
            code = f"PROCEDURE//ICD//10//P{rng.randrange(MIMIC_PROCEDURE_CODES):04d}"
            rows.append((discharge, code, None, None))
        rows.append((discharge, "NOTE//DISCHARGE", None, "Discharge summary.\nStable."))
        when = discharge + timedelta(days=rng.randrange(60, 400))
    rows.sort(key=lambda r: r[0])
    return rows


def write_mimic_bench(root: Path, n_events: int) -> Path:
    """A MEDS cohort of MIMIC-IV's shape with about ``n_events`` timed rows (one shard)."""
    import meds
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "data").mkdir(parents=True)
    (root / "metadata").mkdir()
    rng = random.Random(n_events)
    subjects = max(1, round(n_events / MIMIC_ROWS_PER_SUBJECT))
    schema = meds.DataSchema.schema()
    columns: dict[str, list] = {"subject_id": [], "time": [], "code": [], "nv": [], "tv": []}
    written = 0

    def flush(writer: pq.ParquetWriter) -> None:
        table = pa.table(
            {
                "subject_id": pa.array(columns["subject_id"], pa.int64()),
                "time": pa.array(columns["time"], pa.timestamp("us")),
                "code": pa.array(columns["code"], pa.string()),
                "numeric_value": pa.array(columns["nv"], pa.float32()),
                "text_value": pa.array(columns["tv"], pa.large_string()),
            },
            schema=schema,
        )
        writer.write_table(table, row_group_size=100_000)
        for values in columns.values():
            values.clear()

    with pq.ParquetWriter(root / "data" / "0.parquet", schema) as writer:
        for s in range(subjects):
            budget = (n_events - written) // (subjects - s)
            rows = _mimic_subject(rng, budget - 2)[: budget - 1]
            sid = 10_000_000 + s
            columns["subject_id"].append(sid)  # a static row (no time)
            columns["time"].append(None)
            columns["code"].append("GENDER//F" if s % 2 else "GENDER//M")
            columns["nv"].append(None)
            columns["tv"].append(None)
            for when, code, numeric, text in rows:
                columns["subject_id"].append(sid)
                columns["time"].append(when)
                columns["code"].append(code)
                columns["nv"].append(numeric)
                columns["tv"].append(text)
            written += len(rows)
            if len(columns["code"]) >= 100_000:
                flush(writer)
        if columns["code"]:
            flush(writer)
    labs = [f"LAB//{50_800 + i}//mg/dL" for i in range(MIMIC_LAB_CODES)]
    pq.write_table(
        pa.table({"code": labs, "description": [f"Lab test {i}" for i in range(len(labs))]}),
        root / "metadata" / "codes.parquet",
    )
    return root


WRITERS = {
    "xml": write_xml_bench,
    "meds": write_meds_bench,
    "mimic": write_mimic_bench,
    "omop": write_omop_bench,
}
BASELINES = {
    "xml": _lxml_baseline,
    "meds": _meds_baseline,
    "mimic": _meds_baseline,
    "omop": _omop_baseline,
}
