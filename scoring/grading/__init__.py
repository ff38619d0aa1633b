"""Rubric grading by a model (issue 29): the grader (``grader``, plain Python), its runs on the
shared run machinery (``runs``) and their Celery task (``tasks``)."""
