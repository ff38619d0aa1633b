"""``manage.py load_demo`` creates accounts whose passwords and TOTP secrets are public (in the
README): it runs only with DEBUG=true, and never beside a dataset that is not synthetic.

What it tells an operator who has real data is tested in test_debug_guard.py.
"""

import pytest
from django.core.management import CommandError, call_command

from review.models import Dataset, User

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("args", [(), ("--accounts-only",)])
def test_load_demo_refuses_without_debug(settings, args):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG=true"):
        call_command("load_demo", *args)
    assert not User.objects.filter(email__endswith="@demo.medalign.local").exists()


def test_load_demo_refuses_beside_a_real_dataset(settings):
    settings.DEBUG = True
    Dataset.objects.create(name="medalign-v1.3", is_synthetic=False)
    with pytest.raises(CommandError, match="medalign-v1.3 is not synthetic"):
        call_command("load_demo", "--accounts-only")
    assert not User.objects.filter(email__endswith="@demo.medalign.local").exists()
    Dataset.objects.filter(name="medalign-v1.3").delete()
    call_command("load_demo", "--accounts-only", "--no-progress")
    assert User.objects.filter(email__endswith="@demo.medalign.local").exists()
