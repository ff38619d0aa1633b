"""Fault drill: PostgreSQL goes away while clinicians are saving, then comes back.

    /tmp/venv1/bin/python -m tests.faults.pg_restart            # ~1 min; PostgreSQL away ~8 s
    /tmp/venv1/bin/python -m tests.faults.pg_restart --short    # CI form (same drill)

The app runs under gunicorn (DEBUG off) on a free loopback port; Playwright drives Debian's
Chromium (/usr/bin/chromium) as two clinicians on their review pages. Each ranks part of the
answers (autosaved), then the PostgreSQL cluster is stopped; they finish ranking and marking while
it is away: every autosave gets a JSON 503 and the page shows the server's message while
review.js retries with back-off. PostgreSQL is started again (in a ``finally``: it is running at
the end whatever happens), then restarted once more in the middle of a save
(``pg_ctlcluster restart``). The pages must save by themselves, then submit; the database must
hold each review once, submitted, with every judgement as the clinician left it. Exits 1 if
anything is lost or duplicated, an HTML 500 reaches the page, or no clear message was shown.

This stops the shared PostgreSQL on 127.0.0.1:5432 for a few seconds: never run it concurrently
with other tests that use PostgreSQL (CI runs it after `make test`).
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.faults.common import prepare
from tests.load import harness
from tests.load.harness import log

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
OUTAGE_S = 8


def pg_version() -> str:
    return sorted(os.listdir("/etc/postgresql"))[-1]


def pg_ctl(action: str) -> None:
    subprocess.run(
        [
            "pg_ctlcluster",
            "--skip-systemctl-redirect",
            pg_version(),
            "main",
            action,
            *(["-m", "fast"] if action in ("stop", "restart") else []),
        ],
        check=True,
        timeout=60,
        capture_output=True,
    )


def pg_ready() -> bool:
    return (
        subprocess.run(
            ["pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"], timeout=10, check=False
        ).returncode
        == 0
    )


def ensure_pg_running() -> None:
    if not pg_ready():
        try:
            pg_ctl("start")
        except subprocess.CalledProcessError as exc:
            log(f"pg_ctlcluster start: {exc.stderr!r}")
    if not harness.wait_until(pg_ready, timeout=60):
        log("WARNING: PostgreSQL is still not accepting connections")
    else:
        log("PostgreSQL is running")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="CI form (the same drill)")
    parser.add_argument("--database", default="medalign_fault_pg")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        log(f"{CHROMIUM} is missing (apt-get install chromium)")
        return 1
    env, work = prepare(args.database, "redis://127.0.0.1:6379/9", static=True)
    procs = harness.Processes(work / "logs")
    try:
        return _drill(env, procs)
    finally:
        ensure_pg_running()  # whatever happened above
        procs.stop_all()
        from django.db import connections

        connections.close_all()
        harness.drop_database(args.database)


def _setup() -> list[dict]:
    from django.conf import settings
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    from review.models import Role
    from tests import factories
    from tests.review import review_data

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    dataset = review_data.make_dataset("fault-pg")
    patient = review_data.make_record(dataset, "P-PG-1", n_events=60)
    people = []
    for i in range(2):
        instruction = review_data.make_instruction(dataset, patient, f"I-PG-{i}")
        user = factories.make_user(f"pg{i}@example.edu", roles=[Role.CLINICIAN])
        assignment = review_data.assign(instruction, user)
        client = Client()
        client.force_login(user)
        factories.record_second_factor(client, user)  # signed in with TOTP
        people.append(
            {
                "assignment": assignment.pk,
                "instruction": instruction.pk,
                "session": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "csrf": _get_new_csrf_string(),
            }
        )
    return people


def _drill(env: dict, procs: harness.Processes) -> int:
    people = _setup()
    port = harness.free_port()
    host = f"http://127.0.0.1:{port}"
    procs.start("gunicorn", harness.gunicorn_args(port, workers=2, threads=4), env)
    if not harness.wait_until(lambda: harness.http_ok(host + "/healthz"), timeout=60):
        log("gunicorn did not start:\n" + procs.tail("gunicorn"))
        return 1
    log(f"app on {host}; two clinicians open their review pages in Chromium")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # ORM checks below run beside Playwright
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    messages: set[str] = set()
    answers: list[tuple[int, str, str]] = []  # (status, content type, url) of review endpoints
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        pages = []
        for person in people:
            context = browser.new_context()
            context.set_default_timeout(20_000)
            context.add_cookies(
                [
                    {"name": "sessionid", "value": person["session"], "url": host},
                    {"name": "csrftoken", "value": person["csrf"], "url": host},
                ]
            )
            page = context.new_page()
            page.on(
                "response",
                lambda r: (
                    answers.append((r.status, r.headers.get("content-type", ""), r.url))
                    if "/reviews/" in r.url
                    else None
                ),
            )
            page.goto(f"{host}/instructions/{person['instruction']}/review/")
            pages.append(page)
        for page in pages:  # before the outage: rank two answers, autosaved
            _rank(page, 2)
            _wait_state(page, "saved", 20)
        log("both pages saved their first changes; stopping PostgreSQL")
        try:
            t0 = time.monotonic()
            pg_ctl("stop")
            log("PostgreSQL stopped")
            for page in pages:  # while it is away: rank the rest and mark every answer
                _rank(page, 99)
                for button in page.locator(
                    'button[data-field=is_correct][data-value="true"]'
                ).all():
                    button.click()
            for page in pages:
                _wait_state(page, "offline", 20)
                text = page.locator("#save-status").inner_text()
                messages.add(text)
            for text in messages:
                log(f"the page says: {text!r}")
            time.sleep(max(0, OUTAGE_S - (time.monotonic() - t0)))
        finally:
            ensure_pg_running()
        log(f"PostgreSQL was away {time.monotonic() - t0:.1f} s; waiting for the pages to save")
        for page in pages:
            _wait_state(page, "saved", 60)
        log("both pages saved by themselves after PostgreSQL came back")
        # A restart in the middle of a save: type a comment, restart at once.
        try:
            for page in pages:
                page.locator(".comment-box summary").first.click()
                page.locator("textarea[id^=comment-]").first.fill("after the restart")
            pg_ctl("restart")
            log("pg_ctlcluster restart during the save of a comment")
        finally:
            ensure_pg_running()
        for page in pages:
            _wait_state(page, "saved", 60)
        for page in pages:
            page.click("#submit-review")
        for page in pages:
            _wait_state(page, "submitted", 60)
        log("both reviews submitted")
        browser.close()

    html_500 = [a for a in answers if a[0] >= 500 and "application/json" not in a[1]]
    statuses = sorted({a[0] for a in answers})
    log(f"review endpoint answers seen: {statuses}; HTML 5xx: {len(html_500)}")
    if html_500:
        problems.append(f"{len(html_500)} HTML 5xx answers reached the page")
    if not any("database is unavailable" in m for m in messages):
        problems.append(f"no clear message while the database was away: {messages}")
    problems += _check_database(people)
    for problem in problems:
        log(f"PROBLEM: {problem}")
    log("PASS" if not problems else "FAIL")
    return 0 if not problems else 1


def _rank(page, how_many: int) -> None:  # noqa: ANN001 - a Playwright page
    """Give the next ``how_many`` unranked responses the next free ranks (the cards' pickers)."""
    cards = page.locator("[data-testid=response]")
    ranked = [c for c in cards.all() if c.get_attribute("data-rank")]
    for card in cards.all():
        if how_many <= 0:
            return
        if card.get_attribute("data-rank"):
            continue
        ranked.append(card)
        card.locator("select[data-field=rank]").select_option(str(len(ranked)))
        how_many -= 1


def _wait_state(page, state: str, seconds: float) -> None:  # noqa: ANN001
    # A selector, not a JS predicate: the page's CSP forbids evaluating strings.
    page.locator(f'#save-status[data-state="{state}"]').wait_for(timeout=seconds * 1000)


def _check_database(people: list[dict]) -> list[str]:
    from django.db import connections

    from review.models import ResponseJudgement, Review

    connections.close_all()  # this process's connection died with the restart
    problems = []
    for person in people:
        reviews = list(Review.objects.filter(assignment_id=person["assignment"]))
        if len(reviews) != 1:
            problems.append(f"assignment {person['assignment']}: {len(reviews)} reviews")
            continue
        review = reviews[0]
        judgements = list(ResponseJudgement.objects.filter(review=review))
        ranks = sorted(j.rank for j in judgements if j.rank is not None)
        if review.status != Review.Status.SUBMITTED:
            problems.append(f"review {review.pk}: {review.status}")
        if len(judgements) != len(review.shown_order) or ranks != list(
            range(1, len(judgements) + 1)
        ):
            problems.append(f"review {review.pk}: ranks {ranks} for {len(judgements)} answers")
        if not all(j.is_correct is True for j in judgements):
            problems.append(f"review {review.pk}: a correctness mark was lost")
        if not any(j.comment == "after the restart" for j in judgements):
            problems.append(f"review {review.pk}: the comment saved across the restart was lost")
        log(
            f"review {review.pk}: {review.status}, version {review.version}, "
            f"{len(judgements)} judgements, ranks {ranks}"
        )
    return problems


if __name__ == "__main__":
    sys.exit(main())
