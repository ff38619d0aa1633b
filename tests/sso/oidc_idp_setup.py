"""Migrate the test OpenID Provider's database and create the users and clients a JSON spec
lists (tests/sso/fixtures.py): ``python -m tests.sso.oidc_idp_setup SPEC.json``."""

import json
import sys
from typing import Any

import django

django.setup()

from allauth.account.models import EmailAddress  # noqa: E402
from allauth.idp.oidc.models import Client  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402


def _setup(spec: dict[str, Any]) -> None:
    call_command("migrate", verbosity=0, interactive=False)
    mfa, _ = Group.objects.get_or_create(name="mfa")
    for person in spec.get("users", []):
        user, _ = User.objects.get_or_create(
            username=person["email"], defaults={"email": person["email"]}
        )
        user.set_password(person["password"])
        user.is_active = person.get("active", True)
        user.first_name, user.last_name = person.get("first_name", ""), person.get("last_name", "")
        user.save()
        if person.get("mfa"):
            user.groups.add(mfa)
        else:
            user.groups.remove(mfa)
        EmailAddress.objects.update_or_create(
            user=user, email=person["email"], defaults={"verified": True, "primary": True}
        )
    for spec_client in spec.get("clients", []):
        client, _ = Client.objects.get_or_create(id=spec_client["id"])
        client.name = spec_client["id"]
        client.set_secret(spec_client["secret"])
        client.type = Client.Type.CONFIDENTIAL
        client.skip_consent = True
        client.set_redirect_uris(spec_client["redirect_uris"])
        client.set_scopes(["openid", "profile", "email"])
        client.grant_types = "authorization_code"
        client.response_types = "code"
        client.data = {k: v for k, v in spec_client.items() if k == "backchannel_logout_uri"}
        client.save()


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        _setup(json.load(handle))
