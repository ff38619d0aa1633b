"""A drill's running record, shared by the deployment and restore drills: each step's duration
and every problem found, logged as they happen and summed up at the end."""

import time
from pathlib import Path

from tests.load import harness
from tests.load.harness import log


class Drill:
    def __init__(self, work: Path, procs: harness.Processes) -> None:
        self.work, self.procs = work, procs
        self.problems: list[str] = []
        self.timings: list[tuple[str, float]] = []
        self._t = time.monotonic()

    def step(self, name: str) -> None:
        now = time.monotonic()
        self.timings.append((name, now - self._t))
        log(f"{name}: {now - self._t:.1f} s")
        self._t = now

    def check(self, ok: bool, what: str) -> bool:
        log(("ok: " if ok else "PROBLEM: ") + what)
        if not ok:
            self.problems.append(what)
        return ok
