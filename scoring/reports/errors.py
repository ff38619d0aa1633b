"""The reports' own error: a request or computation that cannot be carried out, with a message
written for researchers (it is shown on the page and quotes no patient data)."""


class ReportError(Exception):
    """A report request that cannot be carried out, with a message for the user."""
