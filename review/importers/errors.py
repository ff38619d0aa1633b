"""Import problems: every one names the file, the line and the field."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    field: str | None
    message: str
    # Text files have lines; Parquet shards and chunked tables have rows.
    unit: str = "line"

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f", {self.unit} {self.line}"
        if self.field:
            where += f", field {self.field!r}"
        return f"{where}: {self.message}"


class ImportFailed(Exception):
    """The import was refused; nothing was written. ``problems`` lists every problem found."""

    MAX_SHOWN = 50

    def __init__(self, problems: list[Problem], not_kept: int = 0) -> None:
        self.problems = problems
        self.not_kept = not_kept  # counted but not kept (see ProblemCollector.MAX_KEPT)
        super().__init__(self.render())

    def render(self) -> str:
        shown = [str(p) for p in self.problems[: self.MAX_SHOWN]]
        total = len(self.problems) + self.not_kept
        more = total - len(shown)
        if more > 0:
            shown.append(f"… and {more} more problem(s)")
        noun = "problem" if total == 1 else "problems"
        return f"Import failed with {total} {noun}; nothing was imported.\n" + "\n".join(shown)


class ProblemCollector:
    """Gathers problems so a file reports all of its bad rows at once, not just the first."""

    # A million-row shard with one bad column would otherwise hold a million problems in memory.
    MAX_KEPT = 1000

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.not_kept = 0

    def add(
        self, file: str, line: int | None, field: str | None, message: str, unit: str = "line"
    ) -> None:
        if len(self.problems) >= self.MAX_KEPT:
            self.not_kept += 1
            return
        self.problems.append(Problem(file, line, field, message, unit))

    def raise_if_any(self) -> None:
        if self.problems:
            raise ImportFailed(self.problems, self.not_kept)
