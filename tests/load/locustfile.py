"""Locust: simulated clinicians working through their queues (run by ``python -m tests.load.run``).

Each locust user is one clinician account, signed in by a session the runner created (the
runner writes ``LOAD_ACCOUNTS``: session cookie, CSRF secret and assigned instruction ids per
clinician). A user opens the queue, then for each assignment: opens the review page, the
excerpt, pages through the record timeline, searches it, autosaves a few drafts and submits
(twice, as a double click would). What each user submitted is written to ``LOAD_RESULTS`` when
the test stops, so the runner can check the database holds every submission exactly once.

Only 127.0.0.1 is ever contacted: the runner passes ``--host http://127.0.0.1:<port>``.
"""

import http.cookiejar
import itertools
import json
import os
import random
import re
import threading

from locust import HttpUser, between, events, task

ACCOUNTS = json.loads(open(os.environ["LOAD_ACCOUNTS"]).read())  # noqa: SIM115
_next_account = itertools.count()
_lock = threading.Lock()
SUBMITTED: list[dict] = []  # {"review": id, "ranks": {response: rank}, "correct": {...}}
DATA_RE = re.compile(r'<script id="review-data" type="application/json">(.*?)</script>', re.S)
SEARCH_TERMS = ["pain", "blood", "pressure", "note", "glucose", "heart rate"]


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    def set_ok(self, cookie, request) -> bool:  # noqa: ANN001
        return False


class Clinician(HttpUser):
    # Think time between actions, seconds (runner: --think). A clinician reads between clicks;
    # 1-3 s between requests is already far busier than a person ranking responses.
    wait_time = between(*map(float, os.environ.get("LOAD_THINK", "1,3").split(",")))

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
        self.done = False

    def _post_json(self, url: str, payload: dict, name: str):  # noqa: ANN202 - a response
        return self.client.post(
            url,
            data=json.dumps(payload),
            headers={
                "Content-Type": "application/json",
                "X-CSRFToken": self.account["csrf"],
                "Accept": "application/json",
                "Referer": self.host + "/",
            },
            name=name,
            catch_response=True,
        )

    @task
    def work(self) -> None:
        self.client.get("/queue/", name="/queue/")
        if not self.todo:
            # Everything submitted: keep reading (a finished clinician rereading their work).
            self.done = True
            if not self.account["instructions"]:
                return
            instruction = self.rng.choice(self.account["instructions"])
            self.client.get(f"/instructions/{instruction}/review/", name="review page")
            return
        instruction = self.todo.pop(0)
        self.review_one(instruction)

    def review_one(self, instruction: int) -> None:
        base = f"/instructions/{instruction}"
        with self.client.get(f"{base}/review/", name="review page", catch_response=True) as r:
            match = DATA_RE.search(r.text or "")
            if r.status_code != 200 or not match:
                r.failure(f"review page: {r.status_code} {r.url} {(r.text or '')[:200]!r}")
                return
            data = json.loads(match.group(1))
        self.wait()  # reading the instruction and the responses
        self.client.get(f"{base}/record/excerpt/", name="record excerpt")
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
        if not data["editable"]:
            return
        responses = data["responses"]
        version = data["version"]
        ranks = list(range(1, len(responses) + 1))
        self.rng.shuffle(ranks)
        if len(ranks) > 2 and self.rng.random() < 0.3:
            ranks[-1] = ranks[-2]  # a tie
        correct = [self.rng.random() < 0.6 for _ in responses]

        def payload(upto: int) -> dict:
            return {
                "version": version,
                "active_seconds": 3,
                "cannot_assess": "",
                "cannot_assess_note": "",
                "judgements": [
                    {
                        "response": r["id"],
                        "position": r["position"],
                        "rank": ranks[i] if i < upto else None,
                        "is_correct": correct[i] if i < upto else None,
                        "error_tags": [],
                        "comment": "load test" if i < upto else "",
                    }
                    for i, r in enumerate(responses)
                ],
            }

        for upto in range(1, len(responses) + 1, 2):  # a few autosaves as the ranking grows
            self.wait()
            with self._post_json(data["urls"]["save"], payload(upto), "autosave") as r:
                if r.status_code != 200:
                    r.failure(f"autosave: {r.status_code} {r.text[:200]}")
                    return
                version = r.json()["version"]
        final = payload(len(responses))
        self.wait()
        for _ in range(2):  # a double click: the second submit must change nothing
            with self._post_json(data["urls"]["submit"], final, "submit") as r:
                if r.status_code != 200 or r.json().get("status") != "submitted":
                    r.failure(f"submit: {r.status_code} {r.text[:200]}")
                    return
        with _lock:
            SUBMITTED.append(
                {
                    "review": data["review"],
                    "ranks": {str(r["id"]): ranks[i] for i, r in enumerate(responses)},
                    "correct": {str(r["id"]): correct[i] for i, r in enumerate(responses)},
                }
            )


@events.test_stop.add_listener
def _write_results(**_: object) -> None:
    with open(os.environ["LOAD_RESULTS"], "w") as fh:
        json.dump(SUBMITTED, fh)
