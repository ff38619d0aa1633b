"""Locust: simulated clinicians working through their queues (run by ``python -m tests.load.run``).

Each locust user is one clinician account, signed in by a session the runner created (the
runner writes ``LOAD_ACCOUNTS``: session cookie, CSRF secret and assigned instruction ids per
clinician). Two user classes, chosen by the runner:

- ``Clinician`` (browse mode): opens the queue, then for each assignment opens the review page,
  the excerpt, pages through the record timeline, searches it, autosaves a few drafts and submits
  (twice, as a double click would), with think time between requests (``LOAD_THINK``);
- ``ClosedLoopClinician`` (closed loop, no think time): opens a task (review page and excerpt),
  saves its completed ranking as a draft ``LOAD_DRAFTS`` times and submits it, then takes the next
  task at once. Throughput is then what the server can do: comparable between apps.

The request shapes (URLs, payloads, what an answer must hold) live only in ``open_task``,
``open_excerpt``, ``save_draft``, ``submit`` and ``judgement_payload`` below, so a change of the
save protocol is made in one place. What each user had acknowledged as submitted (with the time)
is written to ``LOAD_RESULTS`` when the test stops, so the runner can check the database holds
every submission exactly once and count completed annotations in its measuring window.

Only 127.0.0.1 is ever contacted: the runner passes ``--host http://127.0.0.1:<port>``.
"""

import http.cookiejar
import itertools
import json
import os
import random
import re
import threading
import time
from dataclasses import dataclass

from locust import HttpUser, between, constant, events, task

ACCOUNTS = json.loads(open(os.environ["LOAD_ACCOUNTS"]).read())  # noqa: SIM115
_next_account = itertools.count()
_lock = threading.Lock()
# {"review": id, "ranks": {response: rank}, "correct": {...}, "t": unix time of the answer}
SUBMITTED: list[dict] = []
DATA_RE = re.compile(r'<script id="review-data" type="application/json">(.*?)</script>', re.S)
SEARCH_TERMS = ["pain", "blood", "pressure", "note", "glucose", "heart rate"]


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    def set_ok(self, cookie, request) -> bool:  # noqa: ANN001
        return False


# --- the annotation a simulated clinician makes ------------------------------------------------
@dataclass
class Annotation:
    ranks: list[int]  # per response, in the order the page shows them (1 = best; ties allowed)
    correct: list[bool]


def make_annotation(rng: random.Random, n_responses: int) -> Annotation:
    ranks = list(range(1, n_responses + 1))
    rng.shuffle(ranks)
    if len(ranks) > 2 and rng.random() < 0.3:
        ranks[-1] = ranks[-2]  # a tie
    return Annotation(ranks, [rng.random() < 0.6 for _ in range(n_responses)])


# --- the request shapes: the only place that knows URLs and payloads ----------------------------
def _post_json(user: HttpUser, url: str, payload: dict, name: str):  # noqa: ANN202 - a response
    return user.client.post(
        url,
        data=json.dumps(payload),
        headers={
            "Content-Type": "application/json",
            "X-CSRFToken": user.account["csrf"],
            "Accept": "application/json",
            "Referer": user.host + "/",
        },
        name=name,
        catch_response=True,
    )


def open_task(user: HttpUser, instruction: int) -> dict | None:
    """GET the review page; return the page's review data (None, a failure recorded, if absent)."""
    url = f"/instructions/{instruction}/review/"
    with user.client.get(url, name="review page", catch_response=True) as r:
        match = DATA_RE.search(r.text or "")
        if r.status_code != 200 or not match:
            r.failure(f"review page: {r.status_code} {r.url} {(r.text or '')[:200]!r}")
            return None
        return json.loads(match.group(1))


def open_excerpt(user: HttpUser, instruction: int) -> None:
    user.client.get(f"/instructions/{instruction}/record/excerpt/", name="record excerpt")


def judgement_payload(task_data: dict, annotation: Annotation, upto: int) -> dict:
    """The body of a save or submit: the first ``upto`` responses judged, the rest blank."""
    return {
        "version": task_data["version"],
        "active_seconds": 3,
        "cannot_assess": "",
        "cannot_assess_note": "",
        "judgements": [
            {
                "response": r["id"],
                "position": r["position"],
                "rank": annotation.ranks[i] if i < upto else None,
                "is_correct": annotation.correct[i] if i < upto else None,
                "error_tags": [],
                "comment": "load test" if i < upto else "",
            }
            for i, r in enumerate(task_data["responses"])
        ],
    }


def save_draft(user: HttpUser, task_data: dict, annotation: Annotation, upto: int) -> bool:
    """POST an autosave; on success the new version is kept in ``task_data`` for the next one."""
    payload = judgement_payload(task_data, annotation, upto)
    with _post_json(user, task_data["urls"]["save"], payload, "autosave") as r:
        if r.status_code != 200:
            r.failure(f"autosave: {r.status_code} {r.text[:200]}")
            return False
        task_data["version"] = r.json()["version"]
        return True


def submit(user: HttpUser, task_data: dict, annotation: Annotation) -> bool:
    """POST the completed annotation; True once the server acknowledged it as submitted."""
    payload = judgement_payload(task_data, annotation, len(task_data["responses"]))
    with _post_json(user, task_data["urls"]["submit"], payload, "submit") as r:
        if r.status_code != 200 or r.json().get("status") != "submitted":
            r.failure(f"submit: {r.status_code} {r.text[:200]}")
            return False
        return True


def record_submitted(task_data: dict, annotation: Annotation) -> None:
    responses = task_data["responses"]
    with _lock:
        SUBMITTED.append(
            {
                "review": task_data["review"],
                "ranks": {str(r["id"]): annotation.ranks[i] for i, r in enumerate(responses)},
                "correct": {str(r["id"]): annotation.correct[i] for i, r in enumerate(responses)},
                "t": time.time(),
            }
        )


# --- users ---------------------------------------------------------------------------------------
class _SignedIn(HttpUser):
    abstract = True

    def on_start(self) -> None:
        account = ACCOUNTS[next(_next_account) % len(ACCOUNTS)]
        self.account = account
        self.rng = random.Random(account["user"])
        # Session and CSRF cookies are sent by hand and the cookie jar is switched off: with DEBUG
        # off Django marks its cookies Secure, so over plain HTTP on loopback a Set-Cookie from
        # the server would replace ours with one the client then never sends.
        self.client.cookies.set_policy(_NoCookies())
        self.client.headers["Cookie"] = (
            f"sessionid={account['session']}; csrftoken={account['csrf']}"
        )
        self.todo = list(account["instructions"])


class Clinician(_SignedIn):
    # Think time between actions, seconds (runner: --think). A clinician reads between clicks;
    # 1-3 s between requests is already far busier than a person ranking responses.
    wait_time = between(*map(float, os.environ.get("LOAD_THINK", "1,3").split(",")))

    @task
    def work(self) -> None:
        self.client.get("/queue/", name="/queue/")
        if not self.todo:
            # Everything submitted: keep reading (a finished clinician rereading their work).
            if not self.account["instructions"]:
                return
            open_task(self, self.rng.choice(self.account["instructions"]))
            return
        self.review_one(self.todo.pop(0))

    def review_one(self, instruction: int) -> None:
        base = f"/instructions/{instruction}"
        task_data = open_task(self, instruction)
        if task_data is None:
            return
        self.wait()  # reading the instruction and the responses
        open_excerpt(self, instruction)
        cursor = ""
        for _ in range(self.rng.randint(1, 3)):  # page through the timeline
            url = f"{base}/record/events/" + (f"?cursor={cursor}" if cursor else "")
            with self.client.get(url, name="record events", catch_response=True) as r:
                if r.status_code != 200:
                    r.failure(f"events: {r.status_code}")
                    break
                cursor = r.json().get("next") or ""
            if not cursor:
                break
            self.wait()
        self.client.get(
            f"{base}/record/search/",
            params={"q": self.rng.choice(SEARCH_TERMS)},
            name="record search",
        )
        if not task_data["editable"]:
            return
        n = len(task_data["responses"])
        annotation = make_annotation(self.rng, n)
        for upto in range(1, n + 1, 2):  # a few autosaves as the ranking grows
            self.wait()
            if not save_draft(self, task_data, annotation, upto):
                return
        self.wait()
        for _ in range(2):  # a double click: the second submit must change nothing
            if not submit(self, task_data, annotation):
                return
        record_submitted(task_data, annotation)


class ClosedLoopClinician(_SignedIn):
    """No think time: the next request leaves as soon as the previous answer arrived."""

    wait_time = constant(0)
    drafts = int(os.environ.get("LOAD_DRAFTS", "1"))

    @task
    def annotate(self) -> None:
        if not self.todo:
            self.todo = list(self.account["instructions"])  # reopen submitted ones (read only)
        instruction = self.todo.pop(0)
        task_data = open_task(self, instruction)
        if task_data is None:
            return
        open_excerpt(self, instruction)
        if not task_data["editable"]:
            return
        annotation = make_annotation(self.rng, len(task_data["responses"]))
        for _ in range(self.drafts):
            if not save_draft(self, task_data, annotation, len(task_data["responses"])):
                return
        if submit(self, task_data, annotation):
            record_submitted(task_data, annotation)


@events.test_stop.add_listener
def _write_results(**_: object) -> None:
    with open(os.environ["LOAD_RESULTS"], "w") as fh:
        json.dump(SUBMITTED, fh)
