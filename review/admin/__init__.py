"""Django admin registrations, one module per area."""

from . import accounts, records, reviews, rubrics  # noqa: F401 - imported for their registrations
