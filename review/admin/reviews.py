"""Admin for assignments, reviews and error tags."""
