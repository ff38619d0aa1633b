"""Time the review page and the record endpoints on a 200,000-event record.

Builds (once) a synthetic record in the dataset ``bench`` with review.demo's generator and the
real importer, assigns its instruction to a bench clinician, then requests each endpoint N times
with Django's test Client against the configured database and prints p50/p95. Target: p95 under
150 ms per request. Nothing here needs a running server.

``--browser`` also loads the page in Debian's Chromium from a local server it starts: bytes
transferred (target < 150 KB) and the time until the ranker is interactive (target < 300 ms,
median of warm loads).
"""

import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, reset_queries
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from review.demo.accounts import DemoAccount, demo_account_ensure
from review.demo.release import DemoSpec, write_release
from review.models import Dataset, Event, Instruction, Patient, RecordExcerpt, Review, Role, User
from review.selectors.records import Cursor, record_excerpt
from review.services.assignments import assignments_create
from review.services.datasets import dataset_delete
from review.services.excerpts import record_excerpt_cached
from review.services.imports import dataset_import
from tests.bench.browser import page_in_browser, signed_in_client

TARGET_P95_MS = 150.0
BENCH_EMAIL = "bench-clinician@demo.medalign.local"
SEARCHES = ["creatinine", "chest discomfort", "warfarin", "dizziness fatigue", "knee pain"]


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", default="bench")
        parser.add_argument("--events", type=int, default=200_000)
        parser.add_argument("-n", "--requests", type=int, default=40, help="requests per endpoint")
        parser.add_argument("--rebuild", action="store_true", help="regenerate the record")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--browser", action="store_true", help="also measure page weight and interactivity"
        )

    def handle(self, *args: object, **options: object) -> None:
        n = int(options["requests"])  # type: ignore[arg-type]
        if n < 2:
            raise CommandError("--requests must be at least 2")
        patient, instruction = self._record(
            str(options["dataset"]),
            int(options["events"]),
            bool(options["rebuild"]),  # type: ignore[arg-type]
        )
        user = self._clinician()
        # As an admin assigns: in the instruction's study round, whose response set it ranks.
        assignments_create(instructions=[instruction], clinicians=[user], overlap=1, actor=None)
        client = signed_in_client(user)
        rng = random.Random(int(options["seed"]))  # type: ignore[arg-type]
        # The first view starts the review (and draws its order of responses).
        response = client.get(reverse("clinician_review", args=[instruction.pk]))
        if response.status_code != 200:
            raise CommandError(
                f"the bench clinician's review page answered {response.status_code} "
                f"{response.get('Location', '')}".rstrip()
            )
        endpoints = self._endpoints(patient, instruction, rng)
        db = connection.vendor
        self.stdout.write(
            f"Record {patient.person_id}: {patient.event_count:,} events, "
            f"{patient.note_count:,} notes; database {db}; {n} requests per endpoint."
        )
        self.stdout.write(f"{'endpoint':<34} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        failed = []
        for label, make_url in endpoints:
            timings = []
            for i in range(n + 2):
                url, params = make_url(i)
                start = time.perf_counter()
                if params.pop("__post__", None):  # search terms and edits travel as JSON
                    response = client.post(url, json.dumps(params), content_type="application/json")
                else:
                    response = client.get(url, params)
                elapsed = (time.perf_counter() - start) * 1000
                if response.status_code != 200:
                    raise CommandError(f"{label}: {url} answered {response.status_code}")
                if i >= 2:  # the first two warm caches up
                    timings.append(elapsed)
                reset_queries()  # DEBUG keeps every query in memory otherwise
            p50 = statistics.median(timings)
            p95 = _percentile(timings, 95)
            ok = p95 < TARGET_P95_MS
            if not ok:
                failed.append(label)
            self.stdout.write(
                f"{label:<34} {p50:8.1f} {p95:8.1f} {max(timings):8.1f}  {'ok' if ok else 'SLOW'}"
            )
        self._excerpt_stored_vs_computed(instruction, patient, n)
        if failed:
            self.stdout.write(self.style.WARNING(f"p95 over {TARGET_P95_MS:.0f} ms: {failed}"))
        else:
            self.stdout.write(self.style.SUCCESS(f"Every endpoint: p95 < {TARGET_P95_MS:.0f} ms."))
        if options["browser"]:
            self._browser(user, instruction)

    def _browser(self, user: User, instruction: Instruction) -> None:
        result = page_in_browser(user=user, path=reverse("clinician_review", args=[instruction.pk]))
        kb = result.bytes / 1024
        self.stdout.write(
            f"In Chromium: {kb:.0f} KB transferred (target < 150), ranker interactive in "
            f"{result.median_ms:.0f} ms median of {len(result.loads_ms)} warm loads "
            f"(target < 300; {', '.join(f'{ms:.0f}' for ms in result.loads_ms)})"
        )

    def _excerpt_stored_vs_computed(
        self, instruction: Instruction, patient: Patient, n: int
    ) -> None:
        """The excerpt computed on every view (record_excerpt) against stored once per
        instruction (record_excerpt_cached), each rendered as the excerpt endpoint does."""
        RecordExcerpt.objects.filter(instruction=instruction).delete()
        self.stdout.write("excerpt selector + template, in process (no request):")
        for label, select in (
            ("  computed on every view", record_excerpt),
            ("  stored once per instruction", record_excerpt_cached),
        ):
            timings, queries = [], 0
            for i in range(n + 2):
                with CaptureQueriesContext(connection) as captured:
                    start = time.perf_counter()
                    excerpt = select(instruction, patient)
                    render_to_string(
                        "review/clinician/_excerpt.html",
                        {"excerpt": excerpt, "instruction": instruction},
                    )
                    elapsed = (time.perf_counter() - start) * 1000
                if i >= 2:  # the first two warm caches up (and store the excerpt)
                    timings.append(elapsed)
                    queries = len(captured)
            self.stdout.write(
                f"{label:<34} {statistics.median(timings):8.1f} "
                f"{_percentile(timings, 95):8.1f} {max(timings):8.1f}  {queries} queries"
            )

    # --- set-up ---------------------------------------------------------------------------------
    def _record(self, dataset_name: str, events: int, rebuild: bool) -> tuple[Patient, Instruction]:
        existing = Dataset.objects.filter(name=dataset_name).first()
        if existing is not None and not existing.is_synthetic:
            # The bench assigns, opens and autosaves reviews, and a rebuild deletes: never
            # among real clinicians' work.
            raise CommandError(
                f"{dataset_name} is not a synthetic dataset: bench_review works only in its own "
                "(choose another --dataset)"
            )
        patient = (
            Patient.objects.filter(dataset__name=dataset_name, event_count__gte=events)
            .order_by("-event_count")
            .first()
        )
        if patient is None or rebuild:
            if existing is not None:
                # A bench run's review was started: its responses can no longer be replaced
                # (a study's set is fixed once shown), so the bench dataset goes whole.
                dataset_delete(dataset=existing, with_reviews=True)
            self.stdout.write(f"Generating and importing a {events:,}-event record…")
            with tempfile.TemporaryDirectory(prefix="medalign-bench-") as tmp:
                write_release(
                    Path(tmp),
                    DemoSpec(n_patients=1, n_instructions=3, big_record_events=events, seed=99),
                )
                dataset_import(
                    path=tmp,
                    dataset_name=dataset_name,
                    replace=True,
                    description="Synthetic 200k-event record for bench_review. No real patient.",
                    is_synthetic=True,
                )
            Dataset.objects.filter(name=dataset_name).update(is_synthetic=True)
            # Fresh planner statistics, as autovacuum would gather soon after a real import:
            # without them PostgreSQL misjudges the keyset range and sorts instead of walking
            # the (patient, timestamp, seq) index.
            with connection.cursor() as cursor:
                cursor.execute(f"ANALYZE {Event._meta.db_table}")
            patient = Patient.objects.filter(dataset__name=dataset_name).order_by("-event_count")[0]
        instruction = Instruction.objects.filter(patient=patient).order_by("pk").first()
        if instruction is None:
            raise CommandError(f"the {dataset_name} record has no instruction")
        return patient, instruction

    def _clinician(self) -> User:
        # The demo-accounts service builds a real approved account (DUA, application, TOTP).
        return demo_account_ensure(DemoAccount(BENCH_EMAIL, "Bench Clinician", (Role.CLINICIAN,)))

    def _endpoints(
        self, patient: Patient, instruction: Instruction, rng: random.Random
    ) -> list[tuple[str, Callable[[int], tuple[str, dict[str, str]]]]]:
        pk = instruction.pk
        # Cursors spread over the whole record, so "deep" pages really start deep.
        dated = Event.objects.filter(patient=patient, timestamp__isnull=False)
        max_seq = dated.order_by("-seq").values_list("seq", flat=True).first() or 0
        seqs = sorted(rng.sample(range(max_seq + 1), k=min(50, max_seq + 1)))
        rows = list(
            dated.filter(seq__in=seqs).values_list("timestamp", "seq").order_by("timestamp")
        )
        cursors = [Cursor(ts, seq).encode() for ts, seq in rows] or [""]
        days = [ts.date().isoformat() for ts, _ in rows] or [""]
        notes = list(
            Event.objects.filter(patient=patient, event_type="note").values_list("id", flat=True)[
                :50
            ]
        )
        events_url = reverse("record_events", args=[pk])
        search_url = reverse("record_search", args=[pk])
        review = Review.objects.get(
            assignment__instruction=instruction, assignment__clinician__email=BENCH_EMAIL
        )
        save_url = reverse("review_save", args=[review.pk])

        def edit(i: int) -> dict:
            handle = review.handles[i % len(review.handles)]
            at = int(time.time() * 1000)
            value = {"handle": handle, "field": "rank", "value": 1 + i % 2, "at": at}
            return {"edits": [value], "tab": "bench", "seq": i + 1, "active_seconds": 1}

        def pick(items: list, i: int):  # noqa: ANN202 - tiny local helper
            return items[i % len(items)]

        return [
            ("review page", lambda i: (reverse("clinician_review", args=[pk]), {})),
            ("excerpt", lambda i: (reverse("record_excerpt", args=[pk]), {})),
            ("timeline, first page", lambda i: (events_url, {})),
            ("timeline, deep page", lambda i: (events_url, {"cursor": pick(cursors, i)})),
            ("timeline, jump to a date", lambda i: (events_url, {"day": pick(days, i)})),
            (
                "type filter (measurement), deep",
                lambda i: (events_url, {"type": "measurement", "cursor": pick(cursors, i)}),
            ),
            ("type filter (note)", lambda i: (events_url, {"type": "note"})),
            ("search", lambda i: (search_url, {"q": pick(SEARCHES, i), "__post__": True})),
            (
                "search, deep page",
                lambda i: (
                    search_url,
                    {"q": "creatinine", "cursor": pick(cursors, i), "__post__": True},
                ),
            ),
            ("autosave", lambda i: (save_url, {**edit(i), "__post__": True})),
            (
                "whole note",
                lambda i: (reverse("record_event", args=[pk, pick(notes, i)]), {}),
            ),
        ]


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)
