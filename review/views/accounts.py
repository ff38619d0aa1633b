"""Account, application, DUA and admin-queue views."""
