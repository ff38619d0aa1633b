"""Label Studio 1.23.2 closed-loop annotators (no think time), for comparison with MedAlign Review's
`python -m tests.load.run --closed-loop` (open task, save the completed ranking once as a draft,
submit, next task at once).

Each locust user is one annotator with its own legacy API token (`Authorization: Token <key>`,
from $LS_BENCH_DIR/accounts.json written by setup_ls.py; LS_BENCH_DIR defaults to
/tmp/ls-bench, LS_BENCH_ACCOUNTS overrides the whole path). Per iteration, the requests the LS 1.23
labeling UI (label stream, "Label All Tasks") makes for an annotator:

  "open task"  POST /api/dm/actions?id=next_task&project=<pid>   (DataManager taskStore.loadNextTask ->
               invokeAction("next_task"); body = the view's ordering/selectedItems/filters).
               LS_NEXT=api uses GET /api/projects/<pid>/next/ instead (same get_next_task +
               NextTaskSerializer, without the DataManager filter body).
  "draft"      POST /api/tasks/<tid>/drafts?project=<pid>        (LSF createDraftForTask; body as
               LSF prepareData: lead_time, result, started_at, ...)
  "submit"     POST /api/tasks/<tid>/annotations?project=<pid>   (LSF submitAnnotation, with the
               draft_id so the server deletes the draft, as the UI does)

A completed annotation is counted when the submit returns 201. The result fills every control:
six per-response Choices (Correct/Incorrect) and the Ranker order of the six responses.

  .venv/bin/locust -f tests/load/label_studio/locustfile.py --headless -u 50 -r 50 -t 60s \
      --host http://127.0.0.1:8765 --csv "$LS_BENCH_DIR/run50"

Set LS_BENCH_RESULTS=<file> to write the counts and every 201 submit (user, task, annotation id,
time) as JSON when locust quits.
"""

import itertools
import json
import os
import random
import string
import threading
import time
from datetime import UTC, datetime, timedelta

from locust import constant, events, task
from locust.contrib.fasthttp import FastHttpUser
from locust.exception import StopUser

BENCH_DIR = os.environ.get("LS_BENCH_DIR", "/tmp/ls-bench")
with open(os.environ.get("LS_BENCH_ACCOUNTS", os.path.join(BENCH_DIR, "accounts.json"))) as _f:
    ACCOUNTS = json.load(_f)
PROJECT = ACCOUNTS["project_id"]
NEXT_MODE = os.environ.get("LS_NEXT", "dm")  # 'dm' (what the UI calls) or 'api'
DRAFTS = int(os.environ.get("LS_DRAFTS", "1"))  # draft saves before the submit
MAX_ITER = int(
    os.environ.get("LS_MAX_ITER", "0")
)  # >0: each user stops after that many tasks (smoke test)
N_RESPONSES = 6
# DataManager body for next_task with the default tab (no filters, nothing selected)
DM_NEXT_BODY = json.dumps(
    {
        "ordering": [],
        "selectedItems": {"all": False, "included": []},
        "filters": {"conjunction": "and", "items": []},
    }
).encode()

_next_account = itertools.count()
_lock = threading.Lock()
SUBMITTED: list[dict] = []  # {"user", "task", "annotation", "t"}
COUNTS = {"open": 0, "no_task": 0, "draft": 0, "submit_201": 0, "submit_fail": 0}


def _rid() -> str:
    return "".join(random.choices(string.ascii_letters + string.digits + "_-", k=10))


def make_result(rng: random.Random) -> list[dict]:
    result = []
    for i in range(1, N_RESPONSES + 1):
        result.append(
            {
                "id": _rid(),
                "from_name": f"correct_{i}",
                "to_name": f"response_{i}",
                "type": "choices",
                "origin": "manual",
                "value": {"choices": [rng.choice(["Correct", "Incorrect"])]},
            }
        )
    order = [f"r{i}" for i in range(1, N_RESPONSES + 1)]
    rng.shuffle(order)
    result.append(
        {
            "id": _rid(),
            "from_name": "rank",
            "to_name": "ranking",
            "type": "ranker",
            "origin": "manual",
            "value": {"ranker": {"rank": order}},
        }
    )
    return result


class Annotator(FastHttpUser):
    wait_time = constant(0)  # closed loop: no think time

    def on_start(self) -> None:
        n = next(_next_account)
        self.account = ACCOUNTS["users"][n % len(ACCOUNTS["users"])]
        self.rng = random.Random(self.account["id"])
        self.auth = {"Authorization": f"Token {self.account['token']}"}
        self.json_headers = {
            **self.auth,
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        self.iterations = 0

    # --- requests ------------------------------------------------------------------------------
    def open_task(self) -> dict | None:
        if NEXT_MODE == "api":
            method, url, data, headers = "GET", f"/api/projects/{PROJECT}/next/", None, self.auth
        else:
            method, url = "POST", f"/api/dm/actions?id=next_task&project={PROJECT}"
            data, headers = DM_NEXT_BODY, self.json_headers
        ctx = self.client.request(
            method, url, data=data, headers=headers, name="open task", catch_response=True
        )
        with ctx as r:
            if r.status_code == 200:
                data = r.json()
                if data.get("id") and data.get("data", {}).get("excerpt"):
                    return data
                r.failure(f"open task: no task/data in answer {r.text[:200]!r}")
            elif r.status_code == 404:
                r.failure("open task: 404, no more tasks for this user")
                COUNTS["no_task"] += 1
                time.sleep(1)
            else:
                r.failure(f"open task: {r.status_code} {r.text[:200]!r}")
        return None

    def body(self, result: list[dict], opened: float, draft_id=None) -> bytes:
        return json.dumps(
            {
                "lead_time": round(time.time() - opened + 30.0, 3),
                "result": result,
                "draft_id": draft_id,
                "parent_prediction": None,
                "parent_annotation": None,
                "started_at": (datetime.now(UTC) - timedelta(seconds=30)).isoformat(),
                "project": str(PROJECT),
            }
        ).encode()

    def save_draft(self, task_id: int, result: list[dict], opened: float, draft_id=None):
        if draft_id:  # later autosaves PATCH the draft, as LSF updateDraft does
            method, url = "PATCH", f"/api/drafts/{draft_id}/?project={PROJECT}"
        else:
            method, url = "POST", f"/api/tasks/{task_id}/drafts?project={PROJECT}"
        ctx = self.client.request(
            method,
            url,
            data=self.body(result, opened, draft_id),
            headers=self.json_headers,
            name="draft",
            catch_response=True,
        )
        with ctx as r:
            if r.status_code not in (200, 201):
                r.failure(f"draft: {r.status_code} {r.text[:200]!r}")
                return draft_id
            COUNTS["draft"] += 1
            return r.json().get("id", draft_id)

    def submit(self, task_id: int, result: list[dict], opened: float, draft_id) -> None:
        with self.client.post(
            f"/api/tasks/{task_id}/annotations?project={PROJECT}",
            data=self.body(result, opened, draft_id),
            headers=self.json_headers,
            name="submit",
            catch_response=True,
        ) as r:
            if r.status_code == 201:
                ann = r.json()
                COUNTS["submit_201"] += 1
                with _lock:
                    SUBMITTED.append(
                        {
                            "user": self.account["id"],
                            "task": task_id,
                            "annotation": ann.get("id"),
                            "t": time.time(),
                        }
                    )
            else:
                COUNTS["submit_fail"] += 1
                r.failure(f"submit: {r.status_code} {r.text[:200]!r}")

    @task
    def annotate(self) -> None:
        if MAX_ITER and self.iterations >= MAX_ITER:
            raise StopUser()
        self.iterations += 1
        t = self.open_task()
        if t is None:
            return
        COUNTS["open"] += 1
        opened = time.time()
        result = make_result(self.rng)
        draft_id = None
        for _ in range(DRAFTS):
            draft_id = self.save_draft(t["id"], result, opened, draft_id)
        self.submit(t["id"], result, opened, draft_id)


@events.quitting.add_listener
def _report(environment, **_kw) -> None:
    print(f"ls-bench: {COUNTS} (submit 201 = completed annotations)")
    out = os.environ.get("LS_BENCH_RESULTS")
    if out:
        with open(out, "w") as f:
            json.dump({"counts": COUNTS, "submitted": SUBMITTED}, f)
