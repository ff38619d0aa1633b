"""Benchmarks and simulations: the code behind ``manage.py bench_*``, kept out of the apps.

A Django app of its own (``tests.bench``), installed by the settings whenever the ``tests``
package is importable, which is in a checkout: its management commands are the bench entry
points, and nothing in ``review``, ``scoring`` or ``medalign_site`` imports from it. Figures
go to docs/benchmarks.md with the command that reproduces them, never into a test.
"""
