"""The project's modules import each other at the top, where import-linter sees the layers and
a reader sees the dependencies. An import inside a function hides a cycle from both; the few
that must wait live in the places named here, each for the reason beside it."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("review", "scoring", "medalign_site")

# (file, function): why the import must run late.
ALLOWED = {
    # Django's app registry: models and receivers load once every app is ready.
    ("review/apps.py", "ready"): "app registry",
    ("scoring/apps.py", "ready"): "app registry",
    ("scoring/apps.py", "_endpoint_allowed"): "a system check, run once the models load",
    # Imported by the Celery app's configuration before Django's apps are ready.
    ("scoring/runs/sweeper.py", "sweep_once"): "Celery beat, before the app registry",
    # torch and the metric models: only in a worker process, never in the web server.
    ("scoring/tasks.py", "_configure_worker_process"): "heavy libraries, worker only",
}


def late_project_imports(path: Path) -> list[tuple[str, int, str]]:
    """(function, line, module) for each project import inside a function of ``path``."""
    found = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and sub.level == 0 and sub.module:
                modules = [sub.module]
            elif isinstance(sub, ast.Import):
                modules = [alias.name for alias in sub.names]
            else:
                continue
            found += [(node.name, sub.lineno, m) for m in modules if m.split(".")[0] in PROJECT]
    return found


def app_files() -> list[Path]:
    return [
        p
        for package in PROJECT
        for p in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in p.parts
    ]


def test_no_project_import_hides_inside_a_function() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} {function}() imports {module}"
        for path in app_files()
        for function, line, module in late_project_imports(path)
        if (str(path.relative_to(ROOT)), function) not in ALLOWED
    ]
    assert offenders == []


def test_the_guard_finds_an_import_inside_a_function(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n\ndef f():\n    from review.models import Review\n    import json\n"
        "    return Review, json\n"
    )
    assert late_project_imports(module) == [("f", 4, "review.models")]


def test_every_allowed_place_still_imports_late() -> None:
    # A stale exemption would let a new late import through unnoticed.
    for (path, function), reason in ALLOWED.items():
        functions = {f for f, _, _ in late_project_imports(ROOT / path)}
        assert function in functions, (path, function, reason)
