"""Form markup that screen readers depend on: every id a field names in aria-describedby exists,
so help texts and errors are read with their fields."""

import re

import pytest
from django.template.loader import render_to_string

from review.forms.accounts import ApplicationForm, DUAPublishForm

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("form_class", [ApplicationForm, DUAPublishForm])
@pytest.mark.parametrize("bound", [False, True])
def test_every_aria_describedby_id_exists(form_class, bound):
    form = form_class(data={} if bound else None)
    if bound:
        assert not form.is_valid()  # errors shown: their ids are referenced too
    html = render_to_string("review/accounts/_form.html", {"form": form})
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    referenced = [
        ref for value in re.findall(r'aria-describedby="([^"]+)"', html) for ref in value.split()
    ]
    assert referenced, "the form has help texts: something must reference them"
    assert [ref for ref in referenced if ref not in ids] == []
