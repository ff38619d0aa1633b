"""The deployment recipe (deploy/): its settings pass Django's deploy check, its environment
file names every setting a deployment needs and nothing the app does not read, nginx's body
limits are the app's own per endpoint, and its nginx configuration parses. ``make
drill-deploy`` then serves it (tests/drills/deploy.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver

from tests.drills import recipe

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = {
    "DEBUG",
    "SECRET_KEY",
    "MFA_ENCRYPTION_KEY",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "SITE_URL",
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "CACHE_URL",
    "DATA_DIR",
    "BEHIND_TLS_PROXY",
    "TRUSTED_PROXY_COUNT",
    "STORAGE_URL",
    "EMAIL_BACKEND",
    "EMAIL_HOST",
    "DEFAULT_FROM_EMAIL",
    "BACKUP_RECIPIENTS",
}
# Read by the recipe's own files rather than by settings.py.
RECIPE_VARIABLES = {
    "GUNICORN_HOST",
    "GUNICORN_WORKERS",
    "GUNICORN_THREADS",
    "CELERY_CONCURRENCY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
}


def _recipe_env(tmp_path: Path) -> dict[str, str]:
    """The template with its CHANGE-ME secrets made, and its folder on this machine."""
    import base64
    import secrets

    from pyrage import x25519

    made = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "MFA_ENCRYPTION_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "BACKUP_RECIPIENTS": str(x25519.Identity.generate().to_public()),
    }
    env = recipe.env_file()
    placeholders = {k for k, v in env.items() if "CHANGE-ME" in v}
    assert placeholders == set(made), placeholders
    return {**env, **made, "DATA_DIR": str(tmp_path / "var")}


def test_the_recipes_settings_pass_the_deploy_check(tmp_path) -> None:
    # The browser fixtures set DJANGO_ALLOW_ASYNC_UNSAFE for the rest of an xdist worker's
    # session; a deployment never has it (the deploy check refuses it), so neither does this.
    left_out = {"DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "DEBUG", "CACHE_KEY_PREFIX"}
    left_out.add("DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in left_out}
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**env, **_recipe_env(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_environment_file_names_every_required_setting_and_only_real_ones() -> None:
    names = set(recipe.env_file())
    read = set(
        re.findall(
            r'env_(?:str|bool|int|list)\("([A-Z_]+)"',
            (ROOT / "medalign_site/settings.py").read_text(),
        )
    )

    assert names >= REQUIRED, REQUIRED - names
    assert names <= read | RECIPE_VARIABLES, names - read - RECIPE_VARIABLES


def _upload_views() -> dict[str, object]:
    """Every URL whose view takes an upload, as an example path (ids filled with 1)."""
    found: dict[str, object] = {}

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and hasattr(p.callback, "upload_limit"):
                route = prefix + str(p.pattern)
                found["/" + re.sub(r"<(?:\w+:)?\w+>", "1", route)] = p.callback.upload_limit

    walk(get_resolver().url_patterns, "")
    return found


def _nginx_body_limits() -> tuple[int, dict[str, int]]:
    text = (recipe.DEPLOY / "nginx/medalign-proxy.conf").read_text()
    default = int(re.search(r"^client_max_body_size (\d+);", text, re.M).group(1))
    locations = {
        regex: int(size)
        for regex, size in re.findall(
            r"location ~ (\S+) \{[^}]*?client_max_body_size (\d+);", text, re.S
        )
    }
    return default, locations


def test_nginx_body_limits_are_the_apps_per_endpoint_limits() -> None:
    default, locations = _nginx_body_limits()
    views = _upload_views()

    assert default == settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert len(views) >= 3  # two certificate pages and the rubric upload
    matched = set()
    for path, limit in views.items():
        regexes = [r for r in locations if re.match(r, path)]
        assert len(regexes) == 1, f"{path}: no nginx location of its own ({regexes})"
        expected = getattr(settings, limit.setting) + settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        assert locations[regexes[0]] == expected, path
        matched.add(regexes[0])
    assert matched == set(locations)  # no location for an upload that no longer exists


def test_the_nginx_configuration_parses(tmp_path) -> None:
    nginx = recipe.nginx_binary()
    if nginx is None:
        pytest.skip("Debian's nginx is not installed (make nginx; make drill-deploy installs it)")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    (tmp_path / "logs").mkdir()
    site = tmp_path / "site.conf"
    site.write_text(
        recipe.nginx_site(
            https_port=8443,
            http_port=8080,
            backends=[8001, 8002],
            certificate=tmp_path / "cert.pem",
            key=tmp_path / "key.pem",
            static_root=tmp_path / "static",
            logs=tmp_path / "logs",
        )
    )
    main = tmp_path / "nginx.conf"
    main.write_text(recipe.nginx_main(site=site, work=tmp_path))

    result = subprocess.run(
        [nginx, "-t", "-q", "-c", str(main), "-p", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr


def test_the_units_run_the_recipes_gunicorn_and_both_queues() -> None:
    env = recipe.env_file()
    web, web_env, cwd = recipe.unit_command("medalign-web@.service", "8001", env)
    worker, worker_env, _ = recipe.unit_command("medalign-worker@.service", "gpu", env)

    assert web[-1] == "medalign_site.wsgi" and str(recipe.DEPLOY / "gunicorn.conf.py") in web
    assert web_env["GUNICORN_PORT"] == "8001" and cwd == ROOT
    assert worker[worker.index("--queues") + 1] == "gpu"
    assert worker[worker.index("--concurrency") + 1] == env["CELERY_CONCURRENCY"]
    assert {settings.SCORING_MODEL_QUEUE, settings.SCORING_LEXICAL_QUEUE} == {"gpu", "cpu"}
