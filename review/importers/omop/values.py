"""How one OMOP value is read, and how a value that does not read is named.

Ids, numbers, texts and times read as the CDM writes them and as exports bend it: blanks and
the words NULL, NA and NAN are no value, "8507.0" (a spreadsheet's round trip) is the id 8507,
a date alone is midnight in ``TIME_ZONE``. A value that does not read is a problem named by its
column; a row reads on, so that every problem of the row is named at once, not only the first.
"""

from collections.abc import Callable
from datetime import date, datetime, time
from typing import Any, TypeVar

from django.utils import timezone

from ..timestamps import BadTimestamp, parse_timestamp

T = TypeVar("T")


def parse_int(value: Any) -> int | None:
    """An id or other integer; None for no value."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not text or text.upper() in ("NULL", "NA", "NAN"):
        return None
    number = float(text)  # "8507.0" from a spreadsheet round trip is still 8507
    if not number.is_integer() or not -(2**63) <= number < 2**63:
        raise ValueError(f"{value!r} is not an id")
    return int(number)


def parse_float(value: Any) -> float | None:
    """A number; None for no value (NaN included)."""
    if value is None or isinstance(value, int | float):
        return None if value is None or value != value else float(value)
    text = str(value).strip()
    if not text or text.upper() in ("NULL", "NA", "NAN"):
        return None
    return float(text)


def parse_text(value: Any) -> str:
    """Text, trimmed; "" for no value."""
    if value is None:
        return ""
    text = str(value).strip()
    return "" if text.upper() == "NULL" else text


def parse_when(value: Any) -> datetime | None:
    """An aware datetime (a date alone at midnight in ``TIME_ZONE``); None for no value."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else timezone.make_aware(value)
    if isinstance(value, date):
        return timezone.make_aware(datetime.combine(value, time()))
    text = str(value).strip()
    if not text or text.upper() == "NULL":
        return None
    return parse_timestamp(text)


class BadValue(Exception):
    """A value that does not read, or a check that fails, named by its column."""

    def __init__(self, column: str, message: str) -> None:
        self.column = column
        self.message = message
        super().__init__(message)


class BadRow(Exception):
    """Several bad values of one row: each is named, not only the first."""

    def __init__(self, problems: list[BadValue]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


class RowValues:
    """One row's values, read by column: a value that does not parse, or a check that fails,
    is noted and the row reads on, so ``check`` names every problem of the row at once."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.problems: list[BadValue] = []

    def get(self, column: str, parse: Callable[[Any], T]) -> T | None:
        value = self.values.get(column)
        try:
            return parse(value)
        except (ValueError, TypeError, BadTimestamp) as exc:
            self.fail(column, str(exc) or f"{value!r} is not valid")
            return None

    def fail(self, column: str, message: str) -> None:
        self.problems.append(BadValue(column, message))

    def start(self, dt_column: str, date_column: str) -> datetime | None:
        when = self.get(dt_column, parse_when) if dt_column != date_column else None
        when = when or self.get(date_column, parse_when)
        if when is None and not any(p.column in (dt_column, date_column) for p in self.problems):
            self.fail(date_column, "required value is empty")
        return when

    def check_birth(self, birth: date | None, when: datetime, person_id: Any, column: str) -> None:
        if birth is not None and when.date() < birth:
            self.fail(
                column,
                f"event on {when.date()} is before person {person_id}'s birth on {birth}",
            )

    def check(self) -> None:
        if self.problems:
            raise BadRow(self.problems)
