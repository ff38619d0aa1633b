"""The shapes of the annotation requests: URLs, the page's review data, the save/submit body.

Shared by the locust users (``locustfile.py``) and the profiler (``profile.py``), so a change of
the clinician save protocol is made here once. Pure Python: no Django, no locust.
"""

import json
import random
import re
import time
from dataclasses import dataclass

DATA_RE = re.compile(r'<script id="review-data" type="application/json">(.*?)</script>', re.S)
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def review_page_url(instruction: int) -> str:
    return f"/instructions/{instruction}/review/"


def task_data(html: str) -> dict | None:
    """The review data the page embeds for its script (None if the page has none)."""
    match = DATA_RE.search(html or "")
    return json.loads(match.group(1)) if match else None


def save_url(data: dict) -> str:
    return data["urls"]["save"]


def submit_url(data: dict) -> str:
    return data["urls"]["submit"]


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


def judgement_payload(data: dict, annotation: Annotation, upto: int) -> dict:
    """The body of a save or submit: edits judging the first ``upto`` responses.

    The page sends edits ``{handle, field, value, at}``; the server merges them per response and
    field, so each save may repeat earlier edits harmlessly. ``seq`` grows per body sent by this
    user's "tab", so its time is counted once.
    """
    at = int(time.time() * 1000)
    data["_seq"] = data.get("_seq", 0) + 1
    edits = []
    for i, r in enumerate(data["responses"][:upto]):
        edits += [
            {"handle": r["handle"], "field": "rank", "value": annotation.ranks[i], "at": at},
            {
                "handle": r["handle"],
                "field": "is_correct",
                "value": annotation.correct[i],
                "at": at,
            },
            {"handle": r["handle"], "field": "comment", "value": "load test", "at": at},
        ]
    return {"edits": edits, "tab": "load", "seq": data["_seq"], "active_seconds": 3}


def saved_version(answer: dict) -> object:
    """The review's version after a save (kept for the record; saves need no version)."""
    return answer["version"]


def is_submitted(answer: dict) -> bool:
    return answer.get("status") == "submitted"


def acknowledged(data: dict, annotation: Annotation) -> dict:
    """What the runner checks in the database for one acknowledged submission."""
    responses = data["responses"]
    return {
        "review": data["review"],
        "ranks": {r["handle"]: annotation.ranks[i] for i, r in enumerate(responses)},
        "correct": {r["handle"]: annotation.correct[i] for i, r in enumerate(responses)},
    }
