"""Arrow columns to Python values, fast: the same values the library's own conversions give.

``pylist`` and the time conversions replace ``to_pylist`` in the MEDS and OMOP importers'
inner loops (for speed); each is held here against the public call it replaces, on the
values that differ between NumPy and Python: nulls, NaN, integers beyond float precision,
non-ASCII text, times across a DST change and outside datetime64's comfortable range.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from django.test import override_settings
from django.utils import timezone

from review.importers.columnar import NumberTexts, local_times, pylist, utc_wall_times
from review.importers.timestamps import aware

ARRAYS = [
    pa.array([1, None, 2**62 + 1, -(2**63)], pa.int64()),
    pa.array([1, 2, 3], pa.int32()),
    pa.array([None, None], pa.int64()),
    pa.array([1.5, None, float("nan"), -0.0, 1e308]),
    pa.array([0.25, 2.0], pa.float32()),
    pa.array([True, None, False]),
    pa.array([True, False]),
    pa.array(["a", None, "", "é 日本", "x" * 5000]),
    pa.array(["LOINC/1", None], pa.large_string()),
    pa.array([], pa.string()),
    pa.array([], pa.int64()),
    pa.array([[1], None]),  # not a bulk type: the library's way
    pa.chunked_array([pa.array([1, None]), pa.array([3])]),
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: str(a.type))
def test_pylist_gives_what_to_pylist_gives(array):
    expected = array.to_pylist()
    got = pylist(array)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert type(g) is type(e), (g, e)
        if isinstance(e, float) and e != e:
            assert g != g  # NaN stays NaN, not None
        else:
            assert g == e
    # Integers beyond a float's 53 bits survive exactly.
    if pa.types.is_int64(array.type) and len(array) == 4:
        assert got[2] == 2**62 + 1


def _reference_local(values, zone_name):
    """The old conversion: one aware datetime per value, in the default zone."""
    zone = ZoneInfo(zone_name)
    out = []
    for v in values:
        if v is None:
            out.append(None)
        elif v.tzinfo is None:
            out.append(v.replace(tzinfo=zone).astimezone(zone))
        else:
            out.append(v.astimezone(zone))
    return out


# Around New York's DST change (2026-03-08 02:00 local does not exist; 2026-11-01 01:30 twice).
NAIVE = [
    datetime(2026, 3, 8, 1, 59),
    datetime(2026, 3, 8, 3, 0),
    None,
    datetime(2026, 11, 1, 0, 30),
    datetime(2026, 11, 1, 1, 30),
    datetime(2026, 11, 1, 1, 30),  # repeated instants map to the same value
    datetime(1900, 1, 1, 12, 0, 0, 1),
    datetime(2026, 11, 1, 2, 30),
]


@pytest.mark.parametrize("zone_name", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_local_times_match_one_value_at_a_time(zone_name):
    with override_settings(TIME_ZONE=zone_name):
        column = pa.array(NAIVE, pa.timestamp("us"))
        got = local_times(column)
        expected = _reference_local(NAIVE, zone_name)
        assert got == expected
        assert all(g is None or g.tzinfo is not None for g in got)
        # Each value is in the default zone, as before (not only the same instant).
        default = timezone.get_default_timezone()
        assert all(g is None or g.utcoffset() == g.astimezone(default).utcoffset() for g in got)


def test_local_times_of_zoned_dates_and_empty_columns():
    zoned = pa.array([datetime(2026, 1, 1, 12, tzinfo=UTC), None], pa.timestamp("us", tz="UTC"))
    assert local_times(zoned) == [datetime(2026, 1, 1, 12, tzinfo=UTC), None]
    dates = pa.array([datetime(2026, 1, 2).date(), None], pa.date32())
    assert local_times(dates) == [datetime(2026, 1, 2, tzinfo=UTC), None]
    assert local_times(pa.array([], pa.timestamp("us"))) == []
    assert local_times(pa.array([None, None], pa.timestamp("us"))) == [None, None]


@pytest.mark.parametrize("zone_name", ["UTC", "America/New_York"])
def test_utc_wall_times_are_the_same_instants_naive(zone_name):
    with override_settings(TIME_ZONE=zone_name):
        column = pa.array(NAIVE, pa.timestamp("us"))
        got = utc_wall_times(column)
        expected = local_times(column)
        for g, e in zip(got, expected, strict=True):
            if e is None:
                assert g is None
            else:
                assert g.tzinfo is None
                assert g == e.astimezone(UTC).replace(tzinfo=None)
                # The same instant (compared as timestamps: PEP 495 makes an aware time in a
                # repeated hour unequal to every time in another zone).
                assert aware(g).timestamp() == e.timestamp()
                assert aware(g, ZoneInfo(zone_name)).utcoffset() == e.utcoffset()


def test_utc_wall_times_outside_datetime_range_fail_as_the_library_does():
    far = pa.array([datetime(9999, 12, 31, 23, 59)], pa.timestamp("us")).cast(pa.int64())
    beyond = pa.array([far[0].as_py() + int(timedelta(days=2).total_seconds() * 1e6)])
    column = beyond.cast(pa.timestamp("us"))
    with pytest.raises((ValueError, OverflowError)):
        column.to_pylist()
    with pytest.raises((ValueError, OverflowError)):
        utc_wall_times(column)


NUMBERS = [0.0, -0.0, 0.0, -0.0, 1.5, 1.5, -2.5e-7, 1e21, float("nan"), float("inf"), -1.0, 3, 7.0]


def test_number_texts_give_what_formatting_gives_in_any_order():
    """Remembered texts must be the formatted ones: -0.0 and 0.0 are one dictionary key but
    two texts, and NaN is never equal to itself."""
    texts = NumberTexts()
    for order in (NUMBERS, NUMBERS[::-1], NUMBERS):
        assert [texts[x] for x in order] == [f"{x:g}" for x in order]
    assert texts[-0.0] == "-0" and texts[0.0] == "0"
    assert not any(x != x or x == 0 for x in texts)


def test_number_texts_stay_bounded(monkeypatch):
    monkeypatch.setattr(NumberTexts, "LIMIT", 5)
    texts = NumberTexts()
    values = [i + 0.5 for i in range(23)]
    assert [texts[x] for x in values] == [f"{x:g}" for x in values]
    assert 0 < len(texts) <= 5
