"""The layout of docs/architecture.md holds: import-linter's contracts, a thin app.py, entry points on top, no SQL
outside analytics."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("analytics", "sim", "components")
SQL_RE = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE)\b[\s\S]*\b(FROM|INTO|SET|TABLE|VIEW)\b")


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _string_texts(tree: ast.AST) -> list[str]:
    """Every string literal of a module, f-strings with their fields as `{}`."""
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            texts.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
    return texts


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    report = proc.stdout[proc.stdout.find("Contracts") :]
    assert proc.returncode == 0, report or proc.stderr
    assert "0 broken" in report


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_only_entry_points_import_the_app_or_the_cli(path):
    bad = {n for n in _imports(path) if n.split(".")[0] in ("app", "cli")}
    if "commands" in path.relative_to(ROOT).parts:
        bad -= {"app"}  # a command that serves the app (`helios serve`, the Celery worker) builds it
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", [p for p in _modules() if p.parts[len(ROOT.parts)] != "analytics"], ids=str)
def test_no_sql_outside_analytics(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    sql = [t for t in _string_texts(tree) if SQL_RE.search(t)]
    assert not sql, f"{path.relative_to(ROOT)} holds SQL: {sql[0][:80]!r}"


def test_app_module_is_a_thin_factory():
    tree = ast.parse((ROOT / "app.py").read_text())
    top_level = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Expr))]
    assigned = sorted(
        t.id for n in top_level if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    )
    assert assigned == ["app", "server"], f"app.py should only define create_app plus app/server, found {assigned}"
