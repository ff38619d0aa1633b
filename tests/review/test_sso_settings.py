"""SSO_PROVIDERS is read strictly (medalign_site/sso_config.py), and with nothing set nothing
changes: no provider, the same sign-in page, the same CSP."""

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from medalign_site.sso_config import identity_providers, read_providers
from tests.test_settings import load_settings

OIDC = {
    "id": "hospital",
    "protocol": "oidc",
    "name": "Hospital",
    "server_url": "https://login.hospital.example/realms/staff",
    "client_id": "medalign",
    "client_secret_env": "HOSPITAL_SECRET",
}
SAML = {
    "id": "university",
    "protocol": "saml",
    "name": "University",
    "entity_id": "https://idp.university.example/idp",
    "metadata_url": "https://idp.university.example/metadata",
}
ENV = {"HOSPITAL_SECRET": "s3cret"}


def parse(*entries: dict, env: dict | None = None, debug: bool = False):
    return identity_providers(
        json.dumps(list(entries)), env=ENV if env is None else env, debug=debug
    )


def test_nothing_set_means_no_provider():
    trust, providers, origins = identity_providers("", env={})
    assert trust == {} and origins == []
    assert providers["openid_connect"]["APPS"] == [] and providers["saml"]["APPS"] == []


def test_a_provider_is_trusted_for_nothing_unless_told():
    trust, providers, origins = parse(OIDC, SAML)
    assert trust["hospital"]["trusted_for_email"] is False
    assert trust["hospital"]["trusted_for_mfa"] is False
    assert trust["hospital"]["mfa_amr"] == ["mfa"]
    assert "https://refeds.org/profile/mfa" in trust["university"]["mfa_contexts"]
    app = providers["openid_connect"]["APPS"][0]
    assert app["secret"] == "s3cret" and app["settings"]["oauth_pkce_enabled"] is True
    saml = providers["saml"]["APPS"][0]["settings"]
    assert saml["advanced"]["want_assertion_signed"] is True
    assert saml["advanced"]["reject_idp_initiated_sso"] is True
    assert origins == ["https://login.hospital.example", "https://idp.university.example"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({**OIDC, "trusted_for_mfa": "yes"}, "trusted_for_mfa must be true or false"),
        ({**OIDC, "trusted_for_mfa ": True}, "unknown keys: trusted_for_mfa "),
        ({**OIDC, "client_secret_env": "MISSING"}, "the variable MISSING"),
        ({**OIDC, "server_url": "http://login.hospital.example"}, "must use https"),
        ({**OIDC, "protocol": "cas"}, "protocol must be one of"),
        ({**OIDC, "id": "Hospital!"}, "id must be"),
        ({**SAML, "metadata_url": "ftp://x"}, "is not an http(s) URL"),
        ({k: v for k, v in SAML.items() if k != "metadata_url"}, "sso_url is required"),
    ],
)
def test_a_bad_entry_stops_start_up_naming_it(entry, message):
    with pytest.raises(ImproperlyConfigured, match="SSO_PROVIDERS entry") as raised:
        parse(entry)
    assert message in str(raised.value)


def test_two_entries_with_one_id_are_refused():
    with pytest.raises(ImproperlyConfigured, match="used by an earlier entry"):
        parse(OIDC, OIDC)


def test_plain_http_is_allowed_only_on_loopback_in_debug():
    local = {**OIDC, "server_url": "http://127.0.0.1:9000"}
    assert parse(local, debug=True)[0]["hospital"]
    with pytest.raises(ImproperlyConfigured, match="must use https"):
        parse(local, debug=False)


def test_providers_come_from_a_file_or_the_variable_not_both(tmp_path):
    path = tmp_path / "sso.json"
    path.write_text(json.dumps([OIDC]))
    assert read_providers({"SSO_PROVIDERS_FILE": str(path)}) == path.read_text()
    with pytest.raises(ImproperlyConfigured, match="not both"):
        read_providers({"SSO_PROVIDERS_FILE": str(path), "SSO_PROVIDERS": "[]"})


def test_with_nothing_set_sso_is_off_and_the_csp_unchanged(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "print(s.SSO_IDENTITY_PROVIDERS, s.LOCAL_PASSWORDS, s.CONTENT_SECURITY_POLICY)"
    )
    result = load_settings(tmp_path, code, DEBUG="true")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("{} True ")
    assert "form-action 'self'; frame-ancestors" in result.stdout


def test_the_settings_read_the_providers_and_name_their_origins_in_the_csp(tmp_path):
    code = "from django.conf import settings as s; print(s.CONTENT_SECURITY_POLICY)"
    result = load_settings(
        tmp_path, code, DEBUG="true", SSO_PROVIDERS=json.dumps([OIDC]), HOSPITAL_SECRET="x"
    )
    assert result.returncode == 0, result.stderr
    assert "form-action 'self' https://login.hospital.example;" in result.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LOCAL_PASSWORDS": "nope"}, "LOCAL_PASSWORDS='nope' is not a boolean"),
        ({"LOCAL_PASSWORDS": "false"}, "LOCAL_PASSWORDS=false needs an identity provider"),
        ({"SSO_PROVIDERS": "{"}, "SSO_PROVIDERS is not valid JSON"),
    ],
)
def test_bad_sso_settings_stop_start_up(tmp_path, env, message):
    result = load_settings(tmp_path, DEBUG="true", **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr
