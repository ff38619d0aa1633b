"""The deployment recipe (deploy/) read as systemd and nginx would read it, with this machine's
paths and ports in place of the recipe's, for the drills and tests/test_deploy.py.

Every replacement names the text it replaces and fails if that text is gone: when the recipe
changes, the drill stops rather than serve something other than the recipe.
"""

import os
import re
import shlex
import socket
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
APP_PREFIX = "/srv/medalign/app"


def env_file(path: Path = DEPLOY / "medalign.env.example") -> dict[str, str]:
    """KEY=VALUE lines as systemd's EnvironmentFile= reads them (comments, quoted values)."""
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{path}: not KEY=VALUE: {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def unit_command(
    name: str, instance: str, env: dict[str, str]
) -> tuple[list[str], dict[str, str], Path]:
    """The ExecStart= of ``deploy/systemd/<name>`` for ``instance``, as systemd runs it:
    (argv, environment, working directory). The unit's Environment= lines are defaults that the
    environment file (``env``) overrides; the install prefix is this checkout."""
    unit = (DEPLOY / "systemd" / name).read_text()
    service = unit.split("[Service]", 1)[1].split("\n[", 1)[0]

    def specifiers(text: str) -> str:
        text = text.replace("%%", "\0").replace("%i", instance).replace("%H", socket.gethostname())
        return text.replace("\0", "%")

    defaults: dict[str, str] = {}
    exec_start = working = ""
    for line in service.splitlines():
        key, _, value = line.partition("=")
        if key == "Environment":
            k, _, v = specifiers(value).partition("=")
            defaults[k] = v
        elif key == "ExecStart":
            exec_start = specifiers(value)
        elif key == "WorkingDirectory":
            working = value
    merged = {**defaults, **env}
    expanded = re.sub(r"\$\{(\w+)\}", lambda m: merged[m.group(1)], exec_start)
    argv = [arg.replace(APP_PREFIX, str(ROOT)) for arg in shlex.split(expanded)]
    return argv, merged, Path(working.replace(APP_PREFIX, str(ROOT)))


def _replace(text: str, old: str, new: str, what: str) -> str:
    if old not in text:
        raise ValueError(f"{what}: the recipe no longer holds {old!r}")
    return text.replace(old, new)


def nginx_site(
    *,
    https_port: int,
    http_port: int,
    backends: list[int],
    certificate: Path,
    key: Path,
    static_root: Path,
    logs: Path,
) -> str:
    """deploy/nginx/medalign.conf with this machine's site values, on loopback only."""
    site = (DEPLOY / "nginx" / "medalign.conf").read_text()
    what = "deploy/nginx/medalign.conf"
    site = _replace(site, "    listen [::]:80;\n", "", what)
    site = _replace(site, "    listen [::]:443 ssl http2;\n", "", what)
    site = _replace(site, "listen 80;", f"listen 127.0.0.1:{http_port};", what)
    site = _replace(
        site, "listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;", what
    )
    site = _replace(site, "server_name review.example.org;", "server_name 127.0.0.1;", what)
    site = _replace(site, "/etc/ssl/medalign/fullchain.pem", str(certificate), what)
    site = _replace(site, "/etc/ssl/medalign/privkey.pem", str(key), what)
    site = _replace(site, "/srv/medalign/var/staticfiles/", f"{static_root}/", what)
    site = _replace(site, "/var/log/nginx/", f"{logs}/", what)
    site = _replace(
        site,
        "/etc/nginx/snippets/medalign-proxy.conf",
        str(DEPLOY / "nginx/medalign-proxy.conf"),
        what,
    )
    upstreams = re.findall(r"    server 127\.0\.0\.1:\d+ [^\n]*\n", site)
    if len(upstreams) != len(backends):
        raise ValueError(f"{what}: {len(upstreams)} web processes listed, {len(backends)} given")
    for line, port in zip(upstreams, backends, strict=True):
        site = site.replace(line, re.sub(r":\d+ ", f":{port} ", line), 1)
    return site


def nginx_main(*, site: Path, work: Path) -> str:
    """The main configuration around the site, as Debian's /etc/nginx/nginx.conf is: here with
    its pid, logs and temporary folders in ``work`` (nothing of the system's nginx is used)."""
    temp = {n: work / "nginx" / n for n in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for folder in temp.values():
        folder.mkdir(parents=True, exist_ok=True)
    return f"""
user www-data;
worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/logs/nginx-error.log warn;
events {{ worker_connections 256; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    sendfile on;
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {site};
}}
"""


def nginx_binary() -> str | None:
    for candidate in ("/usr/sbin/nginx", "/usr/bin/nginx"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None
