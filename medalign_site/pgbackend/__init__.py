"""PostgreSQL backend: Django's, with a health check that costs no statement (see base.py)."""
