"""Settings of the test OpenID Provider: allauth's ``allauth.idp.oidc`` in a Django process of
its own (tests/sso/fixtures.py starts it). Its state (SQLite file, signing key) lives in the
folder ``SSO_IDP_STATE`` names. Plain http on loopback: oauthlib is told so by
OAUTHLIB_INSECURE_TRANSPORT, set by the fixture."""

import os
from pathlib import Path

STATE = Path(os.environ["SSO_IDP_STATE"])
SECRET_KEY = "test-identity-provider-only-" + "k" * 40
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "allauth",
    "allauth.account",
    "allauth.idp.oidc",
    "tests.sso.oidc_idp_apps.IdPConfig",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "tests.sso.oidc_idp.TamperingMiddleware",
]
ROOT_URLCONF = "tests.sso.oidc_idp"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(STATE / "idp.sqlite3")}
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
AUTHENTICATION_BACKENDS = ["allauth.account.auth_backends.AuthenticationBackend"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_RATE_LIMITS = False
ACCOUNT_LOGOUT_ON_GET = False
# Browsers keep cookies per host, not per port: the IdP's must not overwrite the app's.
SESSION_COOKIE_NAME = "idp_sessionid"
CSRF_COOKIE_NAME = "idp_csrftoken"
IDP_OIDC_PRIVATE_KEY = (STATE / "idp-key.pem").read_text()
IDP_OIDC_ADAPTER = "tests.sso.oidc_idp.Adapter"
