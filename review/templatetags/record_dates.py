"""How long before the record's last event something happened: "2.4 years before the last event".

A note from 2018 in a record that runs to 2022 must not read as current; every dated item of the
excerpt and the timeline says how far it is from the end of the record.
"""

from datetime import datetime

from django import template

register = template.Library()

DAYS_PER_YEAR = 365.25
DAYS_PER_MONTH = DAYS_PER_YEAR / 12


def before_last_event(when: datetime | None, last: datetime | None) -> str:
    """ "the last event's day", "12 days …", "5 months …" or "3.1 years before the last event"."""
    if when is None:
        return "undated"
    if last is None:
        return ""
    days = (last - when).total_seconds() / 86_400
    if days < 1:
        same_day = last.date() == when.date()
        return "the last event's day" if same_day else "1 day before the last event"
    if days < 61:
        n = round(days)
        return f"{n} day{'s' if n != 1 else ''} before the last event"
    if days < 2 * DAYS_PER_YEAR:
        n = round(days / DAYS_PER_MONTH)
        return f"{n} months before the last event"
    return f"{days / DAYS_PER_YEAR:.1f} years before the last event"


@register.filter
def before_last(when: datetime | None, last: datetime | None) -> str:
    return before_last_event(when, last)
