"""Where an export's OMOP tables are, and how one is read: in Arrow record batches.

Every table is read in batches (``BATCH_ROWS`` rows for Parquet; CSV a block of
``CSV_BLOCK_BYTES`` at a time, its values as text), with lower-cased column names, so memory
follows the batch, never the table. A row may straddle two CSV blocks, not three, so the block
is also the longest note a table can hold.
"""

import mmap
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..columnar import BATCH_ROWS
from ..tables import normalise_header
from .cdm import SUFFIXES, TABLES, UNREAD_CDM_TABLES

# CSV is read a block at a time, one thread: every block becomes Python values before it is
# used, so the block bounds memory (larger blocks, read ahead, raised the peak many times).
# A row may straddle two blocks, not three, so the block is also the longest note a table can
# hold.
CSV_BLOCK_BYTES = 1024 * 1024


def find_omop_tables(path: Path, exclude_root: Path | None = None) -> dict[str, Path]:
    """OMOP tables under ``path`` by name (``person.csv``, ``measurement.parquet``…)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    found: dict[str, Path] = {}
    for file in files:
        if exclude_root is not None and exclude_root in file.parents:
            continue
        name = file.stem.lower()
        if name in TABLES and file.suffix.lower() in SUFFIXES:
            found.setdefault(name, file)
    return found


def find_unread_omop_tables(path: Path, exclude_root: Path | None = None) -> dict[str, Path]:
    """The CDM's other tables under ``path`` (``care_site.csv``…): not read, but named in the
    summary as ignored rather than reported as unrecognised files."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    found: dict[str, Path] = {}
    for file in files:
        if exclude_root is not None and exclude_root in file.parents:
            continue
        name = file.stem.lower()
        if name in UNREAD_CDM_TABLES and file.suffix.lower() in SUFFIXES:
            found.setdefault(name, file)
    return found


def row_count(path: Path) -> int:
    """Rows of a table not read: Parquet's footer, or a CSV's lines less its header (a quoted
    newline counts twice: the summary says "about")."""
    if SUFFIXES[path.suffix.lower()] is None:
        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except (pa.ArrowException, OSError):
            return 0
    lines = 0
    last = b"\n"
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return max(lines + (last != b"\n") - 1, 0)


class _MappedTable:
    """A table file for Arrow's CSV reader, memory-mapped, its pages given back as it is read.

    Arrow's streaming CSV reader reads blocks on a background thread up to 32 ahead of its
    consumer, even with ``use_threads=False``, and Arrow does not expose the limit: from an
    ordinary file the read-ahead grew with the table (docs/benchmarks.md), so the import's peak
    memory followed the size of its largest table. (Smaller blocks would bound it but refuse
    long notes: a row may straddle two blocks, not three.) From a memory map the reader's
    blocks are views of the file, not copies; the pages it has parsed are given back to the
    kernel (``madvise(MADV_DONTNEED)``, clean file pages: read again from the file if touched
    again) as the batches go, so only the blocks being parsed are resident. Nothing here runs
    Python on Arrow's thread.
    """

    def __init__(self, path: Path) -> None:
        self.source: pa.NativeFile | str
        self.map: mmap.mmap | None = None
        self.released = 0  # bytes from the start given back
        try:
            with path.open("rb") as fh:
                self.map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # no mmap on this file system; an empty file (ValueError)
            self.source = str(path)  # read as before, read-ahead included
            return
        self.source = pa.BufferReader(pa.py_buffer(self.map))  # views of the map, no copies

    def release_before(self, offset: int) -> None:
        """Give back the pages wholly before ``offset``."""
        if self.map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return  # not Linux: the pages stay mapped (memory follows the file again)
        end = min(offset, len(self.map)) // mmap.PAGESIZE * mmap.PAGESIZE
        if end > self.released:
            self.map.madvise(mmap.MADV_DONTNEED, self.released, end - self.released)
            self.released = end


def iter_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """Record batches with lower-cased column names; CSV values as text."""
    delimiter = SUFFIXES[path.suffix.lower()]
    if delimiter is None:
        parquet = pq.ParquetFile(path)
        names = [normalise_header(n) for n in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
            yield batch.rename_columns(names)
        return
    with path.open("r", encoding="utf-8-sig") as fh:
        header = fh.readline().rstrip("\r\n").split(delimiter)
    names = [normalise_header(n) for n in header]
    table = _MappedTable(path)
    reader = pacsv.open_csv(
        table.source,
        read_options=pacsv.ReadOptions(
            column_names=names, skip_rows=1, block_size=CSV_BLOCK_BYTES, use_threads=False
        ),
        parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    for taken, batch in enumerate(reader):
        # Batch n comes from block n or later (a block gives at most one batch, with the row
        # straddling into the next block): everything before block n has been parsed already.
        table.release_before(taken * CSV_BLOCK_BYTES)
        if batch.num_rows:
            yield batch
