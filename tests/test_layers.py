"""The package's shape: imports go one way, no cycles, no long functions.

The test reads ``swaptrace/`` with :mod:`ast` (nothing is imported), builds
the graph of module imports -- at module level and inside functions alike,
since a deferred import is still a dependency -- and checks it against the
layer table below. Every module must have a layer, so a new module has to be
placed in the table before it can be merged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "swaptrace"

#: (rank, layer name, modules): a module may import only modules of its own rank or lower; same-rank
#: imports are held acyclic by the cycle test. A name covers that module and, for a package, everything in
#: it; every module must be covered by a name here (there is no catch-all), so a new module or package has
#: to be placed before it can be merged.
LAYERS = (
    # the package's face: the version, mark_step, and every stage's entry point loaded on first use
    (100, "face", ("swaptrace",)),
    (90, "cli", ("swaptrace.cli",)),
    (80, "commands", ("swaptrace.commands",)),
    # work spread over a Dask cluster (sweeps, generation by step ranges); uses the pipeline's stage runners
    (75, "parallel", ("swaptrace.parallel",)),
    (70, "pipeline", ("swaptrace.pipeline", "swaptrace.pipeline.run")),
    # the pipeline's per-stage run functions; they never import swaptrace.pipeline.run
    (65, "pipeline stage runners", ("swaptrace.pipeline.stages",)),
    (50, "report", ("swaptrace.pipeline.report", "swaptrace.pipeline.designs")),
    (40, "figures", ("swaptrace.figures",)),
    # models built on other stages' outputs and machinery: the time model prices a stream on an SSD model or
    # a measured disk and measures compute with the capture's child; the device fit runs the SSD model on fio's
    # lab jobs; a runtime profile is read off a capture with the workload's layout
    (35, "stage models", ("swaptrace.timing", "swaptrace.ssd.fit", "swaptrace.capture.runtime_profile")),
    (30, "stages", ("swaptrace.workload.generate", "swaptrace.workload.indices", "swaptrace.workload.export",
                    "swaptrace.workload.train", "swaptrace.workload.train_torchrec", "swaptrace.emulate", "swaptrace.mrc",
                    "swaptrace.compare", "swaptrace.capture", "swaptrace.ssd", "swaptrace.fio", "swaptrace.designs")),
    (10, "foundation", ("swaptrace.errors", "swaptrace.markers", "swaptrace.core", "swaptrace.workload",
                        "swaptrace.workload.spec", "swaptrace.workload.layout", "swaptrace.workload.zipf",
                        "swaptrace.workload.process", "swaptrace.pipeline.filenames")),
    (0, "kernels", ("swaptrace.kernels",)),
)

#: longest function (lines from ``def`` to its last line) outside swaptrace/kernels/
MAX_FUNCTION_LINES = 80
#: files allowed longer functions (none: keep it so)
LONG_FUNCTION_ALLOWED: frozenset[str] = frozenset()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _layer(module: str) -> tuple[int, str]:
    """The rank and name of the most specific layer prefix matching ``module``."""
    best = None
    for rank, name, prefixes in LAYERS:
        for prefix in prefixes:
            # the face covers itself only: a module below it must be named
            if module == prefix or (prefix != "swaptrace" and module.startswith(prefix + ".")):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), rank, name)
    if best is None:
        raise AssertionError(f"{module}: no layer; add it to LAYERS in tests/test_layers.py")
    return best[1], best[2]


def _resolve(importer: str, is_package: bool, node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The swaptrace modules one import statement names (a package counts as its ``__init__``)."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == "swaptrace" or alias.name.startswith("swaptrace."):
                found.add(_longest_module(alias.name, modules))
        return found
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not (target == "swaptrace" or target.startswith("swaptrace.")):
        return found
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        found.add(sub if sub in modules else _longest_module(target, modules))
    return found


def _longest_module(name: str, modules: dict[str, Path]) -> str:
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    assert parts, f"{name}: not a swaptrace module"
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the swaptrace modules it imports anywhere in its body."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges |= _resolve(name, path.name == "__init__.py", node, modules)
        edges.discard(name)
        graph[name] = edges
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (each one is a cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    for name in _modules():
        _layer(name)


def test_no_import_cycles():
    cycles = strongly_connected(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_import_cycles_between_packages():
    """Sibling stage packages (fio, ssd, capture ...) import each other only the way the data flows."""
    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    collapsed: dict[str, set[str]] = {}
    for importer, targets in import_graph().items():
        collapsed.setdefault(package(importer), set()).update(package(t) for t in targets if package(t) != package(importer))
    cycles = strongly_connected(collapsed)
    assert not cycles, "package cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_imports_only_go_down():
    upward = []
    for importer, targets in sorted(import_graph().items()):
        rank, layer = _layer(importer)
        for target in sorted(targets):
            t_rank, t_layer = _layer(target)
            if t_rank > rank:
                upward.append(f"{importer} ({layer}) imports {target} ({t_layer})")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_function_over_80_lines():
    long = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        if rel.startswith("swaptrace/kernels/") or rel in LONG_FUNCTION_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{rel}:{node.lineno} {node.name}: {n} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


# --- the checker itself: each rule must be able to fail -------------------------------------------


def test_cycle_finder_finds_a_cycle_and_passes_a_chain():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.parametrize("module, layer", [
    ("swaptrace.cli", "cli"), ("swaptrace.commands.run", "commands"), ("swaptrace.parallel.sweep", "parallel"),
    ("swaptrace.pipeline.run", "pipeline"), ("swaptrace.pipeline.stages", "pipeline stage runners"),
    ("swaptrace.pipeline.report", "report"), ("swaptrace.figures.fio", "figures"), ("swaptrace.fio.runner", "stages"),
    ("swaptrace.ssd.fit.device", "stage models"), ("swaptrace.ssd.run", "stages"),
    ("swaptrace.capture.session", "stages"), ("swaptrace.core.traceio", "foundation"), ("swaptrace", "face"),
    ("swaptrace.pipeline.filenames", "foundation"), ("swaptrace.kernels.emulate.loop", "kernels"),
])
def test_layer_table(module, layer):
    assert _layer(module)[1] == layer


def test_function_level_and_relative_imports_are_edges(tmp_path):
    src = "def f():\n    from swaptrace.pipeline.report import build_report\n    from . import runner\n"
    tree = ast.parse(src)
    mods = {"swaptrace.pipeline.report": Path(), "swaptrace.fio.runner": Path(), "swaptrace.fio": Path()}
    edges = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            edges |= _resolve("swaptrace.fio.jobs", False, node, mods)
    assert edges == {"swaptrace.pipeline.report", "swaptrace.fio.runner"}


def test_a_module_outside_the_table_has_no_layer():
    """No catch-all: a new top-level module (or one in a new package) fails until it is placed."""
    for name in ("swaptrace.newthing", "swaptrace.newpkg.mod"):
        with pytest.raises(AssertionError, match="no layer"):
            _layer(name)


#: most positional parameters a function outside swaptrace/kernels/ may take; the rest are keyword-only
MAX_POSITIONAL = 6
ROOT = PKG.parent
#: folders whose code may use only what a module makes public: the package and the scripts beside it
PUBLIC_ONLY = ("swaptrace", "research", "analysis", "benchmarks", "tools")


def too_many_positional(tree: ast.AST, rel: str) -> list[str]:
    """Functions of ``tree`` taking more than :data:`MAX_POSITIONAL` positional parameters (self/cls aside)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
            if len(names) > MAX_POSITIONAL:
                found.append(f"{rel}:{node.lineno} {node.name}: {len(names)} positional parameters")
    return found


def test_no_function_over_six_positional_parameters():
    long = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith("swaptrace/kernels/"):
            long += too_many_positional(ast.parse(path.read_text(), filename=rel), rel)
    assert not long, "make the rest keyword-only (*):\n" + "\n".join(long)


def private_imports(tree: ast.AST, module: str) -> list[str]:
    """``from X import _name`` where X is another package than ``module``'s (a module's own package may share
    its private helpers; a script has no package)."""
    own = module.rsplit(".", 1)[0] if "." in module else None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            src_pkg = node.module if node.module.startswith("swaptrace") else None
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    same = own is not None and src_pkg is not None and (node.module == own or node.module.startswith(own + "."))
                    if not same:
                        found.append(f"{module}: from {node.module} import {alias.name}")
    return found


def test_no_private_name_imported_from_another_package():
    found = []
    for top in PUBLIC_ONLY:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "tests" in rel.parts:
                continue
            module = ".".join(rel.with_suffix("").parts)
            found += private_imports(ast.parse(path.read_text(), filename=str(rel)), module)
    assert not found, "private names used past their package:\n" + "\n".join(found)


def test_the_two_checkers_can_fail():
    assert too_many_positional(ast.parse("def f(a, b, c, d, e, f, g): pass"), "x.py")
    assert not too_many_positional(ast.parse("def f(a, b, c, d, e, f, *, g): pass"), "x.py")
    assert private_imports(ast.parse("from swaptrace.ssd.run import _map_units"), "benchmarks.bench_mqsim")
    assert private_imports(ast.parse("from swaptrace.capture.session import _mlp"), "swaptrace.timing.model")
    assert not private_imports(ast.parse("from swaptrace.kernels.emulate.dlist import _unlink"),
                               "swaptrace.kernels.emulate.lru")
