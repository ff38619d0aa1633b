"""Other names a dataset's vocabulary gives the codes of its events."""

from django.db import models

from .records import Dataset


class EventNameSynonym(models.Model):
    """Another name for the events named ``name`` in ``dataset``: a synonym the dataset's
    vocabulary gives their code (OMOP ``concept_synonym``, e.g. "HbA1c MFr Bld" for "Hemoglobin
    A1c/Hemoglobin.total in Blood"). Record search and the excerpt match it as they match the
    name. Written by the import (review.importers.omop.synonyms), only for names the dataset's
    events carry."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="+")
    name = models.TextField()
    synonym = models.TextField()

    class Meta:
        indexes = [models.Index(fields=["dataset", "name"], name="event_name_synonym")]

    def __str__(self) -> str:
        return f"{self.name} = {self.synonym}"
