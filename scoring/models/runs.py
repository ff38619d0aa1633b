"""Abstract models every kind of run shares: a run, and the batches one Celery task each runs.

The concrete models live beside this module (``scoring.models.scoring``, ``generation``,
``grading``); they add what is theirs (a run's dataset and options, a batch's ``run`` foreign
key with ``related_name="batches"``) and keep these fields, statuses and indexes.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone


class RunBase(models.Model):
    """A run: work split into batches, followed by researchers.

    Status and allowed transitions (made in ``scoring.runs.machinery``):
      pending -> running (a worker claimed its first batch) -> done (every batch done)
      pending | running -> failed (a batch failed for good; the reasons are kept in ``error``)
      failed | done -> pending (resume: only what is missing is planned again)
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    total = models.PositiveIntegerField(default=0)  # items to produce (e.g. scores)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]


class BatchBase(models.Model):
    """A slice of a run handed to one Celery task, which takes the batch id only.

    Status and allowed transitions (made in ``scoring.runs.machinery``, each a conditional
    UPDATE so that two workers or two sweeps can never both make the same one):
      pending -> running (claimed by a worker: ``attempts`` + 1, ``claimed_by``, ``task_id``;
                          the worker writes ``heartbeat_at`` while it works)
      running -> done (the claimant finished it) | failed (an error that retrying cannot fix)
      running -> pending (the sweep: its heartbeat is older than ``RUN_HEARTBEAT_TIMEOUT``, so
                          its worker died; queued again to ``queue``)
      running -> failed (the sweep or a new claim, after ``RUN_MAX_ATTEMPTS`` attempts whose
                          workers all died: the batch itself is likely what kills them)
      running -> pending (released for a retry after a transient error, e.g. the database away)
      running -> running (the same task message delivered again after its pool process died:
                          Celery's ``reject_on_worker_lost``; counted as a new attempt)
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    item_ids = models.JSONField(default=list)  # what the batch works on (e.g. response ids)
    attempts = models.PositiveIntegerField(default=0)  # times a worker started it
    error = models.TextField(blank=True)
    seconds = models.FloatField(null=True, blank=True)  # the successful attempt's duration
    # The queue its task was sent to: the sweep re-queues it there.
    queue = models.CharField(max_length=100, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    task_id = models.CharField(max_length=64, blank=True)  # the Celery task that claimed it
    claimed_by = models.CharField(max_length=200, blank=True)  # worker host and process id
    claimed_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Each concrete batch declares ``run = models.ForeignKey(<its run>, related_name="batches")``.
    run_id: int

    class Meta:
        abstract = True
        # The sweep's query: running batches with an old heartbeat.
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="%(app_label)s_%(class)s_hb"),
        ]
