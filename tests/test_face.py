"""The package's public face (``swaptrace/__init__.py``, docs/api.md): cheap to import, and every name resolves.

``import swaptrace`` runs before every ``import swaptrace.x`` -- a training script that only calls
:func:`swaptrace.mark_step` among them -- so it must load none of the heavy libraries; the stages' entry
points are imported on first use. The chain example of docs/api.md runs end to end (``slow``).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import swaptrace

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "swaptrace"
#: libraries ``import swaptrace`` must not load
HEAVY = ("numpy", "numba", "pyarrow", "matplotlib", "click", "pandas", "dask")


def _fresh_python(code: str) -> str:
    """Run ``code`` in a new interpreter started in the repository root (so it imports this checkout)."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_swaptrace_loads_no_heavy_library():
    out = _fresh_python(
        "import sys, json, swaptrace\n"
        f"print(json.dumps({{'file': swaptrace.__file__, 'loaded': [m for m in {HEAVY!r} if m in sys.modules], "
        "'swaptrace': sorted(m for m in sys.modules if m.startswith('swaptrace'))}))")
    got = json.loads(out)
    assert Path(got["file"]).resolve() == PKG / "__init__.py"
    assert got["loaded"] == []
    assert got["swaptrace"] == ["swaptrace", "swaptrace.core", "swaptrace.core.version", "swaptrace.markers"]


def test_a_face_name_loads_its_stage_only_when_used():
    out = _fresh_python(
        "import sys, swaptrace\n"
        "before = 'swaptrace.mrc' in sys.modules\n"
        "curve = swaptrace.MissRatioCurve\n"
        "print(before, 'swaptrace.mrc' in sys.modules, 'MissRatioCurve' in vars(swaptrace))")
    assert out.split() == ["False", "True", "True"]


def test_all_is_the_table_and_the_two_loaded_at_once():
    table = swaptrace._ENTRY_POINTS
    assert len(swaptrace.__all__) == len(set(swaptrace.__all__))
    assert set(swaptrace.__all__) == {"__version__", "mark_step"} | set(table)


@pytest.mark.parametrize("name", sorted(swaptrace._ENTRY_POINTS))
def test_every_face_name_resolves_to_its_module_object(name):
    module, attr = swaptrace._ENTRY_POINTS[name]
    value = getattr(swaptrace, name)
    assert value is getattr(importlib.import_module(module), attr)
    assert value.__doc__ and value.__doc__.strip(), f"{name}: no docstring"
    assert name in dir(swaptrace)


def test_every_name_in_all_resolves_in_a_fresh_interpreter():
    """``from swaptrace import *`` (every lazy name at once, in no particular order) leaves no name unbound."""
    out = _fresh_python("from swaptrace import *\nimport swaptrace\n"
                        "print(sum(getattr(swaptrace, n) is not None for n in swaptrace.__all__), "
                        "len(swaptrace.__all__))")
    found, total = out.split()
    assert found == total


def test_the_version_is_the_core_version():
    from swaptrace.core.version import __version__

    assert swaptrace.__version__ == __version__
    assert swaptrace.mark_step is importlib.import_module("swaptrace.markers").mark_step


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_stage'"):
        swaptrace.no_such_stage  # noqa: B018
    assert not hasattr(swaptrace, "generate")


def test_no_face_name_is_a_subpackage_name():
    """``import swaptrace.x`` binds ``swaptrace.x`` to the module: a face name ``x`` would be shadowed by it."""
    modules = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert not set(swaptrace.__all__) & modules


def test_the_type_checking_imports_match_the_table():
    """What static checkers see (the ``if TYPE_CHECKING:`` block) is what the face loads at run time."""
    tree = ast.parse((PKG / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {}
    for node in ast.walk(block):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                seen[alias.asname or alias.name] = (node.module, alias.name)
    assert seen == swaptrace._ENTRY_POINTS


def test_the_api_pages_example_is_the_scripts():
    """docs/api.md shows the example's body: every line of its python block is a line of the script."""
    doc = (ROOT / "docs" / "api.md").read_text()
    block = doc.split("## The chain in one script", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    script = {line.strip() for line in (ROOT / "docs" / "examples" / "api_chain.py").read_text().splitlines()}
    assert [line for line in block.splitlines() if line.strip() not in script] == []


def test_every_face_name_is_documented():
    doc = (ROOT / "docs" / "api.md").read_text()
    assert [n for n in swaptrace.__all__ if f"`{n}" not in doc] == []


@pytest.mark.slow
def test_the_api_chain_example_writes_the_report(tmp_path):
    """docs/examples/api_chain.py: generate -> emulate -> ssd -> report on ``tiny``, public names only."""
    script = ROOT / "docs" / "examples" / "api_chain.py"
    tree = ast.parse(script.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names} | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m and m.startswith("swaptrace.")}, "the example reaches past the face"
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "swaptrace"}
    assert used and used <= set(swaptrace.__all__)
    # the script's folder leads sys.path: PYTHONPATH makes it import this checkout, as the tests do
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "chain")], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    report = tmp_path / "chain" / "report" / "report.md"
    assert report.is_file() and report.stat().st_size > 0
    assert {"access.parquet", "swapio.parquet", "ssd.parquet"} <= {p.name for p in (tmp_path / "chain").iterdir()}
    assert str(report) in done.stdout
