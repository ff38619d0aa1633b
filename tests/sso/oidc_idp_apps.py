"""The test OpenID Provider's app: it sends back-channel logout tokens when someone signs out
there (tests/sso/oidc_idp.py)."""

from django.apps import AppConfig


class IdPConfig(AppConfig):
    name = "tests.sso"
    label = "sso_test_idp"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_out

        from tests.sso.oidc_idp import on_logout

        user_logged_out.connect(on_logout, dispatch_uid="test_idp_backchannel")
