"""Import problems: every one names the file, the line and the field."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f", line {self.line}"
        if self.field:
            where += f", field {self.field!r}"
        return f"{where}: {self.message}"


class ImportFailed(Exception):
    """The import was refused; nothing was written. ``problems`` lists every problem found."""

    MAX_SHOWN = 50

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        shown = [str(p) for p in self.problems[: self.MAX_SHOWN]]
        more = len(self.problems) - len(shown)
        if more > 0:
            shown.append(f"… and {more} more problem(s)")
        noun = "problem" if len(self.problems) == 1 else "problems"
        return (
            f"Import failed with {len(self.problems)} {noun}; nothing was imported.\n"
            + "\n".join(shown)
        )


class ProblemCollector:
    """Gathers problems so a file reports all of its bad rows at once, not just the first."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, file: str, line: int | None, field: str | None, message: str) -> None:
        self.problems.append(Problem(file, line, field, message))

    def raise_if_any(self) -> None:
        if self.problems:
            raise ImportFailed(self.problems)
