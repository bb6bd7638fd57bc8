"""The dependency direction of architecture.md: analytics and sim stay free of UI (and sim of DuckDB)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _top(name: str) -> str:
    return name.split(".")[0]


@pytest.mark.parametrize("path", _modules("analytics"), ids=lambda p: str(p.relative_to(ROOT)))
def test_analytics_has_no_ui_or_sim_imports(path):
    forbidden = {"dash", "plotly", "components", "dash_bootstrap_components"}
    if "commands" not in path.relative_to(ROOT / "analytics").parts:
        forbidden.add("sim")  # the command adapters may run the simulator (e.g. `helios demo` queueing)
    bad = {n for n in _imports(path) if _top(n) in forbidden}
    assert not bad, f"{path} imports {sorted(bad)}"


@pytest.mark.parametrize("path", _modules("sim"), ids=lambda p: str(p.relative_to(ROOT)))
def test_sim_core_has_no_ui_or_duckdb_imports(path):
    names = _imports(path)
    bad = {n for n in names if _top(n) in {"dash", "plotly", "duckdb", "components", "dash_bootstrap_components"}}
    assert not bad, f"{path} imports {sorted(bad)}"
    if "commands" not in path.relative_to(ROOT / "sim").parts:
        ours = {n for n in names if _top(n) == "analytics" and n != "analytics.schema"}
        assert not ours, f"{path}: the simulator core may import only analytics.schema, not {sorted(ours)}"


def test_app_module_is_a_thin_factory():
    tree = ast.parse((ROOT / "app.py").read_text())
    top_level = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Expr))]
    assigned = sorted(
        t.id for n in top_level if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    )
    assert assigned == ["app", "server"], f"app.py should only define create_app plus app/server, found {assigned}"
