"""Rubric grading by a model: the grader (``grader``, plain Python), its runs on the
shared run machinery (``runs``) and their Celery task (``tasks``)."""
