"""Every write the review app makes goes through a function in this package."""
