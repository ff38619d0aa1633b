"""Benchmark the EHR importer: events/s and peak memory for records of growing size.

For each size it writes a synthetic ``<eventstream>`` record, then imports it in a fresh child
process (so peak RSS belongs to that import alone, read with ``os.wait4``), and in the same run
parses the same file with bare ``lxml.etree.iterparse`` as the library baseline.
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
        parser.add_argument("--sizes", default="10000,100000,200000")
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
