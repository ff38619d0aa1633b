"""Reading the release's TSV/CSV files by header name, with line numbers for every row.

The release's tables are messy: quoting is inconsistent, free text holds tabs inside quotes and
newlines, and the column order is not guaranteed. Rows are read with the csv module in
non-strict mode and addressed by (normalised) header name only.
"""

import csv
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .errors import ImportFailed, Problem

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))

TABLE_SUFFIXES = {".csv", ".tsv", ".txt"}


class TableError(Exception):
    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


@dataclass(frozen=True)
class Row:
    line: int  # line where the row starts (1 = header)
    values: dict[str, str]

    def get(self, *names: str) -> str:
        for name in names:
            value = self.values.get(name)
            if value is not None:
                return value
        return ""


def normalise_header(name: str) -> str:
    return name.strip().strip('"').strip().lstrip("\ufeff").lower().replace(" ", "_")


def detect_delimiter(path: Path, first_line: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    if path.suffix.lower() == ".csv":
        return ","
    return "\t" if first_line.count("\t") > first_line.count(",") else ","


def read_header(path: Path) -> list[str]:
    try:
        with _open(path) as fh:
            first = fh.readline()
    except UnicodeDecodeError as exc:
        raise ImportFailed(
            [Problem(path.name, 1, None, f"not UTF-8 text (byte offset {exc.start})")]
        ) from None
    delimiter = detect_delimiter(path, first)
    return [normalise_header(h) for h in next(csv.reader([first], delimiter=delimiter), [])]


def _open(path: Path) -> TextIO:
    return path.open("r", encoding="utf-8-sig", newline="")


def iter_rows(path: Path) -> Iterator[Row]:
    """Yield rows keyed by normalised header. A row with the wrong number of fields is a problem."""
    try:
        with _open(path) as fh:
            first = fh.readline()
            fh.seek(0)
            delimiter = detect_delimiter(path, first)
            reader = csv.reader(fh, delimiter=delimiter, strict=False, skipinitialspace=False)
            header = [normalise_header(h) for h in next(reader, [])]
            start_line = reader.line_num + 1
            for fields in reader:
                line = start_line
                start_line = reader.line_num + 1
                if not fields or all(not f.strip() for f in fields):
                    continue
                if len(fields) != len(header):
                    # A trailing empty field from a stray delimiter is harmless.
                    while len(fields) > len(header) and not fields[-1].strip():
                        fields.pop()
                    if len(fields) != len(header):
                        raise TableError(
                            Problem(
                                path.name,
                                line,
                                None,
                                f"row has {len(fields)} fields but the header has {len(header)}"
                                " (check quoting around tabs or newlines in free text)",
                            )
                        )
                yield Row(line, dict(zip(header, fields, strict=True)))
    except UnicodeDecodeError as exc:
        raise TableError(
            Problem(path.name, None, None, f"not UTF-8 text (byte offset {exc.start})")
        ) from None
    except csv.Error as exc:
        raise TableError(Problem(path.name, None, None, f"unreadable table: {exc}")) from None


TRUE_WORDS = {"1", "true", "yes", "y", "t", "1.0", "correct"}
FALSE_WORDS = {"0", "false", "no", "n", "f", "0.0", "incorrect"}


def parse_bool(raw: str) -> bool | None:
    """Lenient boolean for release columns: '' and 'NULL'/'nan' mean unknown; junk raises."""
    value = raw.strip().lower()
    if value in ("", "null", "nan", "none", "na", "n/a"):
        return None
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ValueError(f"{raw!r} is not a yes/no value")


def parse_optional_int(raw: str) -> int | None:
    value = raw.strip()
    if value in ("", "NULL", "nan", "None"):
        return None
    try:
        return int(float(value))
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None


def parse_optional_float(raw: str) -> float | None:
    value = raw.strip()
    if value in ("", "NULL", "nan", "None"):
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None
