"""Locust: simulated clinicians working through their queues (run by ``python -m tests.load.run``).

Each locust user is one clinician account, signed in by a session the runner created (the
runner writes ``LOAD_ACCOUNTS``: session cookie, CSRF secret and assigned instruction ids per
clinician). Two user classes, chosen by the runner:

- ``Clinician`` (browse mode): opens the queue, then for each assignment opens the review page
  (the excerpt comes inline, as in the browser), pages through the record timeline, searches it,
  autosaves a few drafts and submits (twice, as a double click would), with think time between
  requests (``LOAD_THINK``);
- ``ClosedLoopClinician`` (closed loop, no think time): opens a task (the review page, which
  carries the excerpt), saves its completed ranking as a draft ``LOAD_DRAFTS`` times and submits
  it, then takes the next task at once. Throughput is then what the server can do: comparable
  between apps. ``FastClosedLoopClinician`` does the same on locust's ``FastHttpUser``
  (geventhttpclient instead of python-requests): the load generator shares the server's two
  cores, and python-requests costs it several times the CPU per request.

The requests are made in ``open_task``, ``save_draft`` and ``submit`` below;
their shapes (URLs, the save/submit body, what an answer must hold) live in ``shapes.py``, shared
with the profiler, so a change of the save protocol is made in one place. What each user had acknowledged as submitted (with the time)
is written to ``LOAD_RESULTS`` when the test stops, so the runner can check the database holds
every submission exactly once and count completed annotations in its measuring window.

Only 127.0.0.1 is ever contacted: the runner passes ``--host http://127.0.0.1:<port>``.
"""

import http.cookiejar
import itertools
import json
import os
import random
import sys
import threading
import time
from pathlib import Path

from locust import HttpUser, between, constant, events, task
from locust.contrib.fasthttp import FastHttpUser

# locust puts this file's folder on sys.path, not the project's: shapes.py is imported as the
# project's module, as the profiler imports it.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.load.shapes import (  # noqa: E402
    JSON_HEADERS,
    Annotation,
    acknowledged,
    is_submitted,
    judgement_payload,
    make_annotation,
    review_page_url,
    save_url,
    saved_version,
    submit_url,
    task_data,
)

ACCOUNTS = json.loads(open(os.environ["LOAD_ACCOUNTS"]).read())  # noqa: SIM115
_next_account = itertools.count()
_lock = threading.Lock()
# {"review": id, "ranks": {response: rank}, "correct": {...}, "t": unix time of the answer}
SUBMITTED: list[dict] = []
SEARCH_TERMS = ["pain", "blood", "pressure", "note", "glucose", "heart rate"]


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    def set_ok(self, cookie, request) -> bool:  # noqa: ANN001
        return False


# --- the requests: URLs and bodies come from shapes.py -----------------------------------------
# Either locust client: python-requests (HttpUser) or geventhttpclient (FastHttpUser).
User = HttpUser | FastHttpUser


def _cookie(user: User) -> dict[str, str]:
    # Sent with every request by hand (see _SignedIn.on_start): both clients accept it per call.
    return {"Cookie": user.cookie}


def _post_json(user: User, url: str, payload: dict, name: str):  # noqa: ANN202 - a response
    return user.client.post(
        url,
        data=json.dumps(payload),
        headers={
            **JSON_HEADERS,
            **_cookie(user),
            "X-CSRFToken": user.account["csrf"],
            "Referer": user.host + "/",
        },
        name=name,
        catch_response=True,
    )


def open_task(user: User, instruction: int) -> dict | None:
    """GET the review page; return the page's review data (None, a failure recorded, if absent)."""
    with user.client.get(
        review_page_url(instruction),
        name="review page",
        headers=_cookie(user),
        catch_response=True,
    ) as r:
        data = task_data(r.text or "") if r.status_code == 200 else None
        if data is None:
            r.failure(f"review page: {r.status_code} {r.url} {(r.text or '')[:200]!r}")
        return data


def save_draft(user: User, data: dict, annotation: Annotation, upto: int) -> bool:
    """POST an autosave; on success the new version is kept in ``data`` for the next one."""
    payload = judgement_payload(data, annotation, upto)
    with _post_json(user, save_url(data), payload, "autosave") as r:
        if r.status_code != 200:
            r.failure(f"autosave: {r.status_code} {r.text[:200]}")
            return False
        data["version"] = saved_version(r.json())
        return True


def submit(user: User, data: dict, annotation: Annotation) -> bool:
    """POST the completed annotation; True once the server acknowledged it as submitted."""
    payload = judgement_payload(data, annotation, len(data["responses"]))
    with _post_json(user, submit_url(data), payload, "submit") as r:
        if r.status_code != 200 or not is_submitted(r.json()):
            r.failure(f"submit: {r.status_code} {r.text[:200]}")
            return False
        return True


def record_submitted(data: dict, annotation: Annotation) -> None:
    with _lock:
        SUBMITTED.append({**acknowledged(data, annotation), "t": time.time()})


# --- users ---------------------------------------------------------------------------------------
class _Account:
    """Signs the user in with an account the runner prepared (any locust client)."""

    def on_start(self) -> None:
        account = ACCOUNTS[next(_next_account) % len(ACCOUNTS)]
        self.account = account
        self.rng = random.Random(account["user"])
        # Session and CSRF cookies are sent by hand and the cookie jar is switched off: with DEBUG
        # off Django marks its cookies Secure, so over plain HTTP on loopback a Set-Cookie from
        # the server would replace ours with one the client then never sends.
        # An empty CookieJar is falsy: ask for the attribute, not its truth.
        jar = self.client.cookiejar if hasattr(self.client, "cookiejar") else self.client.cookies
        jar.set_policy(_NoCookies())
        self.cookie = f"sessionid={account['session']}; csrftoken={account['csrf']}"
        self.todo = list(account["instructions"])


class _SignedIn(_Account, HttpUser):
    abstract = True


class Clinician(_SignedIn):
    # Think time between actions, seconds (runner: --think). A clinician reads between clicks;
    # 1-3 s between requests is already far busier than a person ranking responses.
    wait_time = between(*map(float, os.environ.get("LOAD_THINK", "1,3").split(",")))

    @task
    def work(self) -> None:
        self.client.get("/queue/", name="/queue/", headers=_cookie(self))
        if not self.todo:
            # Everything submitted: keep reading (a finished clinician rereading their work).
            if not self.account["instructions"]:
                return
            open_task(self, self.rng.choice(self.account["instructions"]))
            return
        self.review_one(self.todo.pop(0))

    def review_one(self, instruction: int) -> None:
        base = f"/instructions/{instruction}"
        data = open_task(self, instruction)
        if data is None:
            return
        self.wait()  # reading the instruction, the excerpt (inline) and the responses
        cursor = ""
        for _ in range(self.rng.randint(1, 3)):  # page through the timeline
            url = f"{base}/record/events/" + (f"?cursor={cursor}" if cursor else "")
            with self.client.get(
                url, name="record events", headers=_cookie(self), catch_response=True
            ) as r:
                if r.status_code != 200:
                    r.failure(f"events: {r.status_code}")
                    break
                cursor = r.json().get("next") or ""
            if not cursor:
                break
            self.wait()
        # A POST, as the page sends it (search terms can quote the record: not in URLs).
        with _post_json(
            self, f"{base}/record/search/", {"q": self.rng.choice(SEARCH_TERMS)}, "record search"
        ) as r:
            if r.status_code != 200:
                r.failure(f"search: {r.status_code}")
        if not data["editable"]:
            return
        n = len(data["responses"])
        annotation = make_annotation(self.rng, n)
        for upto in range(1, n + 1, 2):  # a few autosaves as the ranking grows
            self.wait()
            if not save_draft(self, data, annotation, upto):
                return
        self.wait()
        for _ in range(2):  # a double click: the second submit must change nothing
            if not submit(self, data, annotation):
                return
        record_submitted(data, annotation)


DRAFTS = int(os.environ.get("LOAD_DRAFTS", "1"))


# When each closed-loop user first ran out of assignments (time.time()). From then on it reopens
# its submitted reviews read-only: cheap pages that are not annotations, so the runner reports
# them and a run whose window they reach is not a clean throughput figure.
EXHAUSTED: list[float] = []


def annotate(user: User) -> None:
    """Closed loop, no think time: the next request leaves as soon as the previous answer came."""
    if not user.todo:
        if not getattr(user, "exhausted", False):
            user.exhausted = True
            with _lock:
                EXHAUSTED.append(time.time())
        user.todo = list(user.account["instructions"])  # reopen submitted ones (read only)
    instruction = user.todo.pop(0)
    data = open_task(user, instruction)  # the page carries the excerpt inline
    if data is None or not data["editable"]:
        return
    annotation = make_annotation(user.rng, len(data["responses"]))
    for _ in range(DRAFTS):
        if not save_draft(user, data, annotation, len(data["responses"])):
            return
    if submit(user, data, annotation):
        record_submitted(data, annotation)


class ClosedLoopClinician(_SignedIn):
    wait_time = constant(0)
    tasks = [annotate]


class FastClosedLoopClinician(_Account, FastHttpUser):
    wait_time = constant(0)
    tasks = [annotate]


_STARTED: list[float] = []


@events.test_start.add_listener
def _note_start(**_: object) -> None:
    _STARTED.append(time.time())


@events.spawning_complete.add_listener
def _write_spawned(**_: object) -> None:
    # The runner measures from here (plus a warm-up) to the end of the run.
    if os.environ.get("LOAD_SPAWNED"):
        with open(os.environ["LOAD_SPAWNED"], "w") as fh:
            json.dump(
                {"started": _STARTED[0] if _STARTED else time.time(), "spawned": time.time()}, fh
            )


@events.test_stop.add_listener
def _write_results(**_: object) -> None:
    with open(os.environ["LOAD_RESULTS"], "w") as fh:
        json.dump(SUBMITTED, fh)
    with open(os.environ["LOAD_RESULTS"] + ".exhausted", "w") as fh:
        json.dump(EXHAUSTED, fh)
