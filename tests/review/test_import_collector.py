"""Python's cyclic garbage collector is paused while an import reads and writes its rows.

An import allocates millions of short-lived tuples and lists that form no cycles; the collector
still walked them, and everything older, hundreds of times: at a million MEDS events about a
third of the importer's Python time (3.7 s with it, 2.2-3.0 s without). Paused for the import
only, and restored however it ends."""

import gc
from pathlib import Path

import pytest

from review.importers import ImportFailed, import_release
from review.importers import meds as meds_module
from tests.review.test_import_bulk_path import cohort

pytestmark = pytest.mark.django_db


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the collector was running while the MEDS loader read its batches."""
    states: list[bool] = []
    original = meds_module.MedsLoader.load_batch

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        states.append(gc.isenabled())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(meds_module.MedsLoader, "load_batch", spy)
    return states


def test_the_collector_is_paused_during_an_import_and_running_after(
    tmp_path: Path, seen: list[bool]
) -> None:
    assert gc.isenabled()
    import_release(cohort(tmp_path), dataset_name="m")
    assert seen and not any(seen)
    assert gc.isenabled()


def test_the_collector_runs_again_after_a_failed_import(tmp_path: Path, seen: list[bool]) -> None:
    with pytest.raises(ImportFailed):
        import_release(cohort(tmp_path, bad_last_row=True), dataset_name="m")
    assert seen and not any(seen)
    assert gc.isenabled()


def test_a_collector_the_caller_had_paused_stays_paused(tmp_path: Path, seen: list[bool]) -> None:
    gc.disable()
    try:
        import_release(cohort(tmp_path), dataset_name="m")
        assert not gc.isenabled()
    finally:
        gc.enable()
