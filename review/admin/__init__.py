"""Django admin registrations, one module per area."""

from . import accounts, records, reviews  # noqa: F401 - imported for their registrations
