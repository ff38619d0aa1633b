"""Runs: work split into batches, one Celery task per batch, that heal by themselves.

Scoring runs (``scoring.runs.scoring``) and generation runs (``scoring.generation.runs``, the
example below) share this machinery; a new kind of
run plugs in with these pieces and copies nothing:

1. **Models** (a module of ``scoring/models/``, the package Django finds them in)::

       from scoring.models.runs import BatchBase, RunBase

       class GenerationRun(RunBase):          # status, total, error, created_by, timestamps
           dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="+")
           ...                                # the kind's own options

           class Meta(RunBase.Meta):
               pass

       class GenerationBatch(BatchBase):      # status, item_ids, attempts, heartbeat, claim, queue
           run = models.ForeignKey(GenerationRun, on_delete=models.CASCADE, related_name="batches")

           class Meta(BatchBase.Meta):        # keeps the sweep's (status, heartbeat_at) index
               pass

   The batch's foreign key must be called ``run``. ``item_ids`` holds what the batch works on.

2. **Work**: a function ``work(batch) -> int`` that does the batch and returns how many results
   it wrote. It must be idempotent: a batch can run again (its worker died after writing; a
   worker thought dead was only slow), so it checks what already exists and writes the rest
   keyed by a unique constraint (``bulk_create(..., ignore_conflicts=True)``). Wrap it::

       def generation_batch_execute(*, batch_id: int, task_id: str | None = None) -> int:
           return machinery.batch_execute(
               kind=GENERATION, batch_id=batch_id, task_id=task_id, work=_generate_batch
           )

   ``batch_execute`` claims the batch (a conditional UPDATE: one worker only), writes a
   heartbeat from a thread while ``work`` runs, and finishes the batch and, with the last
   batch, the run.

3. **Task** (``scoring.runs.tasks`` has the base and the options; keep ``name=`` fixed so that
   messages already queued still find it after code moves)::

       @shared_task(name="scoring.generation.batch", run_kind="generation", **BATCH_TASK_OPTIONS)
       def generation_batch(self: BatchTask, batch_id: int) -> int:
           return self.run_batch(batch_id)

   Import the task module from the app's ``tasks.py`` so that Celery's autodiscovery finds it.

4. **Kind**, registered at import (import the module in the app's ``AppConfig.ready``)::

       GENERATION = machinery.register(machinery.RunKind(
           name="generation", run_model=GenerationRun, batch_model=GenerationBatch,
           task=generation_batch, execute=generation_batch_execute,
           replan=_replan,          # (run, open batches) -> new batches for what is missing
           queue_for=_queue_for,    # batch -> Celery queue name
           produced=_produced,      # run -> how many of its results exist (its progress)
           produced_name="generated",          # that count's name in the progress JSON
           describe_error=describe,  # optional: what a failed batch records (default: type only)
       ))

   Create a run in a service that bulk-creates its batches and calls
   ``machinery.run_start(GENERATION, run, batches, enqueue=True)`` (queued on commit);
   ``machinery.run_resume(kind=GENERATION, run=run)`` is Resume.

5. **Pages**: an entry in ``scoring.runs.views.PAGES`` (URL names, title, noun), a detail
   template extending ``scoring/runs/run_detail.html`` (progress, live, and Resume), and the
   URLs of ``run_progress_json`` and ``run_resume`` with ``{"kind": "<name>"}``.

What the machinery then does for every kind: the sweep (``machinery.runs_sweep``, on a timer in
every worker's main process every ``RUN_SWEEP_INTERVAL`` s: ``scoring.runs.sweeper``) re-queues,
exactly once, a running batch whose heartbeat is older than ``RUN_HEARTBEAT_TIMEOUT`` (its worker
died), fails it with the reason after ``RUN_MAX_ATTEMPTS`` attempts, and re-sends the pending
batches of a run where nothing happened for the timeout (a worker died holding their message
before it claimed them). Resume, progress counts and the batch state machine (``BatchBase``)
are shared too.
"""
