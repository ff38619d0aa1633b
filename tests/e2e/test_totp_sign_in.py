"""The browser tests' TOTP sign-in must not depend on where in its 30-second window the clock is.

A CI run failed on `sign_in_with_totp`: the page stayed on the second-factor step. allauth
accepts only the current window's code (MFA_TOTP_TOLERANCE is 0), so a code computed in the
last instant of its window is refused when the server checks it a moment later. Here the
helper's clock stands at half a second before a window ends and the server's clock one second
later: the code has to be one the server will still accept.
"""

import types

import pytest
from allauth.mfa import app_settings as mfa_settings
from allauth.mfa.totp.internal import auth as totp_auth

from review.models import Role
from tests import factories
from tests.e2e.test_accessibility import sign_in_with_totp

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


class _Clock:
    """A clock that moves only when slept on (a sleep costs no real time)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_code_asked_for_at_the_end_of_its_window_still_signs_in(live_server, page, monkeypatch):
    period = mfa_settings.TOTP_PERIOD
    clock = _Clock(1_800_000_000 // period * period + period - 0.5)
    monkeypatch.setattr(
        factories, "time", types.SimpleNamespace(time=clock.time, sleep=clock.sleep)
    )
    # The server checks the code a second after the helper computed it.
    monkeypatch.setattr(totp_auth, "time", types.SimpleNamespace(time=lambda: clock.now + 1.0))
    factories.active_dua()
    user = factories.make_user("tess@example.edu", roles=[Role.CLINICIAN])

    sign_in_with_totp(page, live_server.url, user.email)

    assert "/accounts/" not in page.url
