"""Measuring the review page as a clinician's browser gets it (for ``bench_review --browser``).

Starts the app on a free loopback port (runserver, no reloader), signs a Chromium context in with
a session cookie, loads the page several times and reads, from the browser itself, the bytes
transferred and the time from navigation start until review.js marked the page live
(``body[data-review-ready]``: the ranker takes input from then on).
"""

import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.test import Client

from review.models import User
from tests.factories import record_second_factor

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))


@dataclass(frozen=True)
class BrowserLoad:
    bytes: int  # the first (cold) load: document, CSS, scripts
    loads_ms: list[float]  # warm loads, navigation start to interactive

    @property
    def median_ms(self) -> float:
        return statistics.median(self.loads_ms)


def signed_in_client(user: User) -> Client:
    """A test client signed in as ``user`` with the second factor passed in its session."""
    client = Client()
    client.force_login(user)
    record_second_factor(client, user)
    return client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def page_in_browser(*, user: User, path: str, warm_loads: int = 7) -> BrowserLoad:
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium")
    port = _free_port()
    server = subprocess.Popen(  # noqa: S603 - our own manage.py, fixed arguments
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=settings.BASE_DIR,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        cookie = signed_in_client(user).cookies["sessionid"].value
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            context = browser.new_context()
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
            page = context.new_page()
            sizes: list[int] = []
            page.on("requestfinished", lambda r: sizes.append(r.sizes()["responseBodySize"]))
            page.goto(base + path)
            page.wait_for_selector("body[data-review-ready]")
            cold = sum(sizes)
            loads = []
            for _ in range(warm_loads):
                page.reload()
                page.wait_for_selector("body[data-review-ready]")
                loads.append(float(page.get_attribute("body", "data-review-ready") or 0))
            browser.close()
        return BrowserLoad(bytes=cold, loads_ms=loads)
    finally:
        server.terminate()
        server.wait(timeout=10)
