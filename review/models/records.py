"""Datasets and the longitudinal record: patients, encounters, events; instructions and answers."""

from django.db import models


class Dataset(models.Model):
    """A named, versioned collection ("medalign-v1.3", "demo"). Everything below belongs to one."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    is_synthetic = models.BooleanField(default=False)
    show_references_to_clinicians = models.BooleanField(
        default=False,
        help_text="Blind review hides clinician reference answers; tick to show them.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Patient(models.Model):
    """One pseudonymous patient (``person_id`` as in the release) and their demographics."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="patients")
    person_id = models.CharField(max_length=64)
    birth_date = models.DateField(null=True, blank=True)
    gender = models.CharField(max_length=32, blank=True)
    race = models.CharField(max_length=100, blank=True)
    ethnicity = models.CharField(max_length=100, blank=True)
    demographics = models.JSONField(default=dict, blank=True)
    source_file = models.CharField(max_length=300, blank=True)
    source_format = models.CharField(max_length=20, blank=True)  # "record" | "eventstream"
    event_count = models.PositiveIntegerField(default=0)
    note_count = models.PositiveIntegerField(default=0)
    first_event_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    # Coded events named by their raw code (no description: review.importers.descriptions),
    # which record search and the excerpt cannot match to a clinical word.
    undescribed_event_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["dataset", "person_id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "person_id"], name="unique_patient")
        ]

    def __str__(self) -> str:
        return f"{self.dataset.name}:{self.person_id}"

    @property
    def coded_event_count(self) -> int:
        return max(0, self.event_count - self.note_count)

    @property
    def mostly_undescribed(self) -> bool:
        """More than half of the record's coded events are named only by their code."""
        return 2 * self.undescribed_event_count > self.coded_event_count > 0


class Encounter(models.Model):
    """A visit (paper-era ``<visit>``) or an ``<encounter>`` block of the release format."""

    patient = models.ForeignKey(Patient, on_delete=models.CASCADE, related_name="encounters")
    ordinal = models.PositiveIntegerField()
    encounter_type = models.CharField(max_length=100, blank=True)
    start = models.DateTimeField(null=True, blank=True)
    end = models.DateTimeField(null=True, blank=True)
    care_sites = models.JSONField(default=list, blank=True)
    providers = models.JSONField(default=list, blank=True)
    event_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["patient", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["patient", "ordinal"], name="unique_encounter")
        ]

    def __str__(self) -> str:
        return f"Encounter {self.ordinal} of {self.patient_id}"


class Event(models.Model):
    """One coded event or note. Records reach 100,000+ events: always page, never load whole."""

    # No single-column FK indexes: the composite indexes below start with these columns, and
    # every extra index slows the bulk load of records with 100,000+ events.
    patient = models.ForeignKey(
        Patient, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    encounter = models.ForeignKey(
        Encounter,
        on_delete=models.CASCADE,
        related_name="events",
        null=True,
        blank=True,
        db_index=False,
    )
    seq = models.PositiveIntegerField(help_text="Order of the event in the source file.")
    timestamp = models.DateTimeField(null=True, blank=True)
    event_type = models.CharField(max_length=40)
    code = models.CharField(max_length=120, blank=True)
    name = models.TextField(blank=True)
    value = models.CharField(max_length=100, blank=True)
    value_numeric = models.FloatField(null=True, blank=True)
    unit = models.CharField(max_length=60, blank=True)
    text = models.TextField(blank=True)  # note text
    note_type = models.CharField(max_length=120, blank=True)
    attributes = models.JSONField(default=dict, blank=True)  # provider/care-site/visit ids…

    class Meta:
        ordering = ["patient", "timestamp", "seq"]
        indexes = [
            models.Index(fields=["patient", "timestamp", "seq"], name="event_patient_time"),
            models.Index(fields=["encounter", "timestamp", "seq"], name="event_encounter_time"),
            # Record search and the excerpt find events by name: distinct names by a loose index
            # scan, then each name's events newest first, without reading the whole record.
            models.Index(fields=["patient", "name", "timestamp", "seq"], name="event_patient_name"),
            # The type filter pages newest first on (timestamp, seq) without a sort.
            models.Index(
                fields=["patient", "event_type", "timestamp", "seq"], name="event_patient_type_seq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.code} @ {self.timestamp}"


class TaxonomyEntry(models.Model):
    """One row of ``instruction-taxonomy.csv``: category, subcategory, description."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="taxonomy")
    category = models.CharField(max_length=100)
    subcategory = models.CharField(max_length=200)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["category", "subcategory"]
        verbose_name_plural = "taxonomy entries"
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "subcategory"], name="unique_taxonomy_subcategory"
            )
        ]

    def __str__(self) -> str:
        return f"{self.category} / {self.subcategory}"


class Instruction(models.Model):
    """A clinician-written question or task grounded in one patient's record."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="instructions")
    instruction_id = models.CharField(max_length=64)
    question = models.TextField()
    patient = models.ForeignKey(
        Patient, on_delete=models.SET_NULL, null=True, blank=True, related_name="instructions"
    )
    person_id = models.CharField(max_length=64, blank=True)  # as given, even before the EHR loads
    filename = models.CharField(max_length=300, blank=True)
    category = models.CharField(max_length=100, blank=True, db_index=True)
    subcategory = models.CharField(max_length=200, blank=True)
    specialty = models.CharField(max_length=100, blank=True, db_index=True)
    source = models.CharField(max_length=100, blank=True)
    evidence = models.TextField(blank=True)
    is_applicable = models.BooleanField(null=True, blank=True)
    is_sufficient = models.BooleanField(null=True, blank=True)
    is_used_eval = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["dataset", "instruction_id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "instruction_id"], name="unique_instruction")
        ]
        indexes = [models.Index(fields=["dataset", "specialty"])]

    def __str__(self) -> str:
        return f"{self.dataset.name}:{self.instruction_id}"


class RecordExcerpt(models.Model):
    """The excerpt of an instruction's record, computed once and reused by every clinician.

    The excerpt (BM25 over the record's latest notes and event names) depends only on the
    instruction's question and the patient's record, not on who reads it, and costs more than
    the rest of the review page. ``fingerprint`` names what it was computed from (the excerpt
    code's version, the question, the patient and the record's size and last event), so a row
    that no longer matches is recomputed; the importer also deletes the rows of a record it
    reloads or an instruction whose question changed (``--replace``), since a reloaded record
    may keep its size. ``content`` holds patient text: it lives in the database with the record
    it is drawn from, never in a cache server.
    """

    instruction = models.OneToOneField(
        Instruction, on_delete=models.CASCADE, primary_key=True, related_name="record_excerpt"
    )
    patient = models.ForeignKey(Patient, on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=64)
    content = models.JSONField()
    # The excerpt rendered as the review page shows it (``_excerpt.html``), so a page view reads
    # it instead of rendering ~100 template variables; ``html_version`` names the template and
    # time zone it was rendered with (``review.selectors.records.excerpt_html_version``).
    html = models.TextField(blank=True, default="")
    html_version = models.CharField(max_length=64, blank=True, default="")
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"excerpt of instruction {self.instruction_id}"


class ReferenceResponse(models.Model):
    """A clinician-written answer; several per instruction (``annotator_num``)."""

    instruction = models.ForeignKey(
        Instruction, on_delete=models.CASCADE, related_name="references"
    )
    annotator = models.CharField(max_length=64)  # "Annotator_1"
    annotator_order = models.PositiveIntegerField(default=1)  # numeric part, for "first"
    text = models.TextField()

    class Meta:
        ordering = ["instruction", "annotator_order", "annotator"]
        constraints = [
            models.UniqueConstraint(fields=["instruction", "annotator"], name="unique_reference")
        ]

    def __str__(self) -> str:
        return f"{self.instruction_id} {self.annotator}"


class ModelResponse(models.Model):
    """Text an LLM produced for an instruction. ``model_name`` never reaches clinicians."""

    instruction = models.ForeignKey(Instruction, on_delete=models.CASCADE, related_name="responses")
    model_name = models.CharField(max_length=100, db_index=True)
    text = models.TextField()
    context_length = models.PositiveIntegerField(null=True, blank=True)
    truncation_policy = models.CharField(max_length=100, blank=True)
    generation_length = models.PositiveIntegerField(null=True, blank=True)
    generation_metadata = models.JSONField(default=dict, blank=True)
    # Labels shipped with the release (MedAlign's own clinician review), kept for comparison.
    release_binary_correct = models.BooleanField(null=True, blank=True)
    release_rank = models.FloatField(null=True, blank=True)
    # A heuristic hit of ``review.blinding`` (the text names a model or its maker), listed for an
    # admin to confirm. Every response is masked when rendered, flagged or not.
    names_own_model = models.BooleanField(
        default=False, help_text="The text names a model: it could unblind reviewers."
    )
    mask_checked_by = models.ForeignKey(
        "review.User", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    mask_checked_at = models.DateTimeField(null=True, blank=True)
    # A candidate an admin retired: it never joins a study; its scores are kept.
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_by = models.ForeignKey(
        "review.User", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["instruction", "model_name"]
        constraints = [
            models.UniqueConstraint(fields=["instruction", "model_name"], name="unique_response")
        ]

    def __str__(self) -> str:
        return f"{self.instruction_id} / response {self.pk}"
