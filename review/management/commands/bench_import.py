"""Benchmark the EHR importers: events/s and peak memory for inputs of growing size.

For each size it writes a synthetic input, then imports it in a fresh child process (so peak RSS
belongs to that import alone), and in the same run reads the same input with the bare library as
the baseline: an ``<eventstream>`` record with ``lxml.etree.iterparse``; a MEDS cohort (1,000
events a subject) with pyarrow's ``iter_batches``; OMOP CDM CSV tables (person, visits, concept,
measurement, note) with pyarrow's streaming CSV reader.
"""

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection
from lxml import etree

from medalign_site.procinfo import peak_rss_mb
from review.demo import make_patient, write_eventstream
from review.importers import import_release
from review.models import Dataset

DATASET = "bench-import"


class Command(BaseCommand):
    help = "Time the importer on 10k/100k/200k-event records: events/s and peak memory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sizes", default="10000,100000,200000", help="XML record sizes")
        parser.add_argument(
            "--cohort-sizes", default="10000,100000,1000000", help="MEDS and OMOP event counts"
        )
        parser.add_argument("--formats", default="xml,meds,omop")
        parser.add_argument("--child", type=Path, help=argparse_hidden())
        parser.add_argument("--keep", action="store_true", help="keep the bench dataset")

    def handle(self, *args: object, **options: object) -> None:
        if options["child"]:
            self._child(Path(options["child"]))  # type: ignore[arg-type]
            return
        sizes = [int(s) for s in str(options["sizes"]).split(",")]
        db = connection.vendor
        self.stdout.write(
            f"database: {db}; python {sys.version.split()[0]}; {os.cpu_count()} cores"
        )
        formats = str(options["formats"]).split(",")
        cohort_sizes = [int(s) for s in str(options["cohort_sizes"]).split(",")]
        for fmt in ("meds", "omop"):
            if fmt in formats:
                self._cohort_rows(fmt, cohort_sizes, keep=bool(options["keep"]))
        if "xml" not in formats:
            return
        rows = []
        with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
            for index, size in enumerate(sizes):
                path = Path(tmp) / f"{8_000_000 + index}.xml"
                write_eventstream(
                    make_patient(random.Random(index), index, size, "eventstream"), path
                )
                baseline = _lxml_baseline(path)
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
                result = json.loads(out.decode().strip().splitlines()[-1])
                peak_mb = result["peak_mb"]
                rows.append((size, result, baseline, peak_mb, path.stat().st_size))
        self.stdout.write(
            f"{'events':>9} {'file MB':>8} {'import s':>9} {'events/s':>10} "
            f"{'lxml-only ev/s':>15} {'peak RSS MB':>12} {'RSS-baseline MB':>16}"
        )
        for _size, result, baseline, peak_mb, nbytes in rows:
            self.stdout.write(
                f"{result['events']:>9,} {nbytes / 1e6:>8.1f} {result['seconds']:>9.2f} "
                f"{result['events'] / result['seconds']:>10,.0f} {baseline:>15,.0f} "
                f"{peak_mb:>12.0f} {peak_mb - result['rss_before_mb']:>16.0f}"
            )
        first, last = rows[0], rows[-1]
        ratio = last[3] / first[3]
        self.stdout.write(
            f"peak memory {last[0]:,}-event file / {first[0]:,}-event file: {ratio:.2f}x "
            f"(target <= 1.5x)"
        )
        slowest = min(r[1]["events"] / r[1]["seconds"] for r in rows)
        self.stdout.write(
            f"slowest import: {slowest:,.0f} events/s (target >= 20,000 on PostgreSQL)"
        )
        if not options["keep"]:
            Dataset.objects.filter(name=DATASET).delete()

    def _cohort_rows(self, fmt: str, sizes: list[int], keep: bool) -> None:
        rows = []
        for size in sizes:
            with tempfile.TemporaryDirectory(prefix=f"bench-{fmt}-") as tmp:
                root = Path(tmp) / fmt
                write = write_meds_bench if fmt == "meds" else write_omop_bench
                write(root, size)
                nbytes = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
                baseline = _meds_baseline(root) if fmt == "meds" else _omop_baseline(root)
                result = _run_child(root)
                rows.append((result, baseline, nbytes))
                if not keep:
                    Dataset.objects.filter(name=DATASET).delete()
        label = "pyarrow-only ev/s"
        self.stdout.write(f"{fmt.upper()}:")
        self.stdout.write(
            f"{'events':>9} {'input MB':>8} {'import s':>9} {'events/s':>10} "
            f"{label:>18} {'peak RSS MB':>12} {'RSS-baseline MB':>16}"
        )
        for result, baseline, nbytes in rows:
            self.stdout.write(
                f"{result['events']:>9,} {nbytes / 1e6:>8.2f} {result['seconds']:>9.2f} "
                f"{result['events'] / result['seconds']:>10,.0f} {baseline:>18,.0f} "
                f"{result['peak_mb']:>12.0f} {result['peak_mb'] - result['rss_before_mb']:>16.0f}"
            )
        ratio = rows[-1][0]["peak_mb"] / rows[0][0]["peak_mb"]
        self.stdout.write(
            f"peak memory {rows[-1][0]['events']:,} / {rows[0][0]['events']:,} events: "
            f"{ratio:.2f}x (target <= 1.5x)"
        )

    def _child(self, path: Path) -> None:
        rss_before = peak_rss_mb() or 0.0
        start = time.perf_counter()
        summary = import_release(path, dataset_name=DATASET, replace=True)
        seconds = time.perf_counter() - start
        result = {
            "events": summary.counts["events"],
            "seconds": seconds,
            "rss_before_mb": rss_before,
            "peak_mb": (peak_rss_mb() or 0.0),
        }
        self.stdout.write(json.dumps(result))


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


def write_meds_bench(root: Path, n_events: int) -> None:
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


def write_omop_bench(root: Path, n_events: int) -> None:
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
