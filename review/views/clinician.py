"""Clinician views: queue, review page, record endpoints, autosave and submit."""
