"""Nothing that reads model output or imported text can backtrack, and a change that would make
it do so fails here rather than landing silently.

Masking (``review.blinding`` with ``review.lexicon``) reads every response; the importers read
every imported record. Each pattern they apply is compiled by RE2 through ``review.linear``
(linear in the text whatever the pattern); Python's ``re`` backtracks, and one crafted
response or record line held a worker for seconds to minutes. Timing tests cannot tell (a
timed assertion is either flaky or too loose), so this test reads the code: no module in scope
imports a backtracking engine or calls one, and none holds a compiled ``re`` pattern. A new
importer module is in scope as soon as it exists.
"""

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The engines that backtrack, and RE2 itself: outside review/linear.py every pattern goes
# through it, so its guards (lone surrogates, memory for big alternations) always apply.
FORBIDDEN = {"re", "regex", "sre_compile", "sre_parse", "_sre", "re2", "fnmatch"}
IN_SCOPE = sorted(
    [
        ROOT / "review" / "blinding.py",
        ROOT / "review" / "lexicon.py",
        *(ROOT / "review" / "importers").rglob("*.py"),
    ]
)


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _backtracking_uses(source: str) -> list[str]:
    """Imports of a forbidden engine, and any ``re.<name>`` reached through an alias."""
    found: list[str] = []
    aliases: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN:
                    found.append(f"line {node.lineno}: import {alias.name}")
                    aliases.add(alias.asname or alias.name)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] in FORBIDDEN
            and node.level == 0
        ):
            names = ", ".join(a.name for a in node.names)
            found.append(f"line {node.lineno}: from {node.module} import {names}")
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", IN_SCOPE, ids=_module_name)
def test_no_module_that_reads_hostile_text_uses_a_backtracking_engine(path):
    assert _backtracking_uses(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", IN_SCOPE, ids=_module_name)
def test_no_module_that_reads_hostile_text_holds_an_re_pattern(path):
    module = importlib.import_module(_module_name(path))
    held = [
        name
        for name, value in vars(module).items()
        if isinstance(value, re.Pattern)
        or (
            isinstance(value, tuple | list | frozenset | set)
            and any(isinstance(v, re.Pattern) for v in value)
        )
    ]
    assert held == []


def test_the_scan_sees_every_way_in():
    source = (
        "import re\nimport regex as rx\nfrom re import compile\nfrom re2 import search\n"
        "PATTERN = re.compile('a(?=b)')\nrx.search('a', 'b')\n"
    )
    assert _backtracking_uses(source) == [
        "line 1: import re",
        "line 2: import regex",
        "line 3: from re import compile",
        "line 4: from re2 import search",
        "line 5: re.compile",
        "line 6: rx.search",
    ]
    assert _backtracking_uses("from review import linear\nlinear.Pattern('a')\n") == []


def test_the_scope_holds_masking_and_every_importer():
    names = {_module_name(p) for p in IN_SCOPE}
    assert {"review.blinding", "review.lexicon", "review.importers.ehr_xml"} <= names
    assert len([n for n in names if n.startswith("review.importers.")]) >= 10
