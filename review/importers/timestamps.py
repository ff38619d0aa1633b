"""Timestamp parsing for both EHR XML formats, strict and fast.

Paper-era records mix ``MM/DD/YYYY HH:MM`` and ``MM/DD/YYYY hh:mm AM/PM``; the release uses
``YYYY-MM-DD HH:MM:SS``. Parsed values are cached because an ``<entry>`` shares its timestamp
with all its events and visits repeat the same few values.
"""

from datetime import UTC, date, datetime, tzinfo
from functools import lru_cache

from django.utils import timezone


class BadTimestamp(ValueError):
    pass


def aware(value: datetime, zone: tzinfo = UTC) -> datetime:
    """A naive UTC wall-clock time (``columnar.utc_wall_times``) as an aware datetime in
    ``zone``."""
    utc = value.replace(tzinfo=UTC)
    return utc if zone is UTC else utc.astimezone(zone)


@lru_cache(maxsize=65536)
def _parse(raw: str, tz: tzinfo) -> datetime:
    text = raw.strip()
    naive: datetime | None = None
    if "/" in text:
        naive = _parse_us(text)
    else:
        try:
            naive = datetime.fromisoformat(text)
        except ValueError:
            naive = None
    if naive is None:
        raise BadTimestamp(f"unparseable timestamp {raw!r}")
    if naive.tzinfo is not None:
        return naive
    return timezone.make_aware(naive, tz)


def _parse_us(text: str) -> datetime | None:
    # "03/14/2019", "03/14/2019 09:30", "03/14/2019 09:35 AM"
    parts = text.split()
    try:
        month, day, year = (int(p) for p in parts[0].split("/"))
        hour = minute = second = 0
        if len(parts) >= 2:
            hms = [int(p) for p in parts[1].split(":")]
            hour, minute = hms[0], hms[1]
            second = hms[2] if len(hms) > 2 else 0
        if len(parts) == 3:
            meridiem = parts[2].upper()
            if meridiem not in ("AM", "PM") or not 1 <= hour <= 12:
                return None
            hour = hour % 12 + (12 if meridiem == "PM" else 0)
        elif len(parts) > 3:
            return None
        return datetime(year, month, day, hour, minute, second)
    except (ValueError, IndexError):
        return None


def parse_timestamp(raw: str) -> datetime:
    return _parse(raw, timezone.get_default_timezone())


def parse_date(raw: str) -> date | None:
    text = raw.strip()
    if not text or text.upper() == "NULL":
        return None
    try:
        return parse_timestamp(text).date()
    except BadTimestamp:
        return None
