"""The package structure the product promises: no import cycles between modules (imports inside
functions count, and so do imports for type checkers only: a type cycle is still a design cycle),
lower layers never import higher ones and no module imports another's private (underscore) names
(type-checking imports included in both), imports inside functions stay rare (each is a
start-up-time choice), and no two classes share a name."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("advisor", "estimators", "workloads", "reports")

# Layers from the bottom up: a module may import its own layer or lower ones.  The first prefix of
# a module's name (longest first) that is listed gives its layer.
LAYERS = [
    ("estimators", "reports", "advisor", "advisor.errors", "advisor.caches", "advisor.memory"),
    ("estimators.sampling",),
    ("advisor.plan",),
    ("advisor.safety",),
    ("advisor.warehouse",),
    ("advisor.engine",),
    ("advisor.calibration", "advisor.context"),
    ("advisor.partition",),
    ("advisor.layout",),
    ("advisor.sketch",),
    ("advisor.maintain", "advisor.maintain.operators"),
    ("advisor.maintain.spark",),
    ("advisor.maintain.policy",),
    ("advisor.recursive",),
    ("advisor.estimation",),
    ("advisor.selection",),
    ("advisor.serve",),
    ("workloads.data",),
    ("workloads", "workloads.replay", "workloads.bench"),
    ("advisor.cli", "advisor.api"),
]
MAX_FUNCTION_IMPORTS = 80


def layer_of(module: str) -> int:
    """The layer of a module: the longest listed prefix wins.

    >>> layer_of("advisor.plan.ir") < layer_of("advisor.sketch.capture")
    True
    """
    best, rank = -1, None
    for i, names in enumerate(LAYERS):
        for n in names:
            if (module == n or module.startswith(n + ".")) and len(n) > best:
                best, rank = len(n), i
    assert rank is not None, f"{module} is in no layer"
    return rank


def modules() -> dict[str, Path]:
    out = {}
    for top in TOP:
        for p in (ROOT / top).rglob("*.py"):
            name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = p
    return out


MODULES = modules()


def imports(name: str, path: Path, type_checking: bool = False):
    """(imported module, imported name or None, inside a function?) for every import of ours that
    runs, and with ``type_checking`` also those for type checkers only (``if TYPE_CHECKING:``,
    which are never counted as inside a function)."""
    tree = ast.parse(path.read_text())
    top_level = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        typing_only = isinstance(node, (ast.Import, ast.ImportFrom)) and _in_type_checking(tree, node)
        if typing_only and not type_checking:
            continue
        inner = id(node) not in top_level and not typing_only
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                if f"{mod}.{a.name}" in MODULES:
                    yield f"{mod}.{a.name}", None, inner
                elif mod in MODULES:
                    yield mod, a.name, inner
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES:
                    yield a.name, None, inner


def _in_type_checking(tree, node) -> bool:
    for n in tree.body:
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            if any(node is m for m in ast.walk(n)):
                return True
    return False


def function_imports() -> int:
    count = 0
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        top_level = {id(n) for n in tree.body}
        count += sum(1 for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                     and id(n) not in top_level and not _in_type_checking(tree, n))
    return count


def graph(type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports (with ``type_checking``, also for type checkers only)."""
    g = defaultdict(set)
    for name, path in MODULES.items():
        for mod, _, _ in imports(name, path, type_checking):
            if mod != name and not name.startswith(mod + "."):  # a package's own __init__ is loaded first
                g[name].add(mod)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(graph(type_checking=True)) == []


def test_a_type_checking_import_counts_for_cycles(tmp_path):
    src = tmp_path / "typed.py"
    src.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                   "    from advisor.warehouse.store import Store\n")
    assert list(imports("advisor.typed", src)) == []
    typed = list(imports("advisor.typed", src, type_checking=True))
    assert typed == [("advisor.warehouse.store", "Store", False)]
    assert cycles({"advisor.warehouse.store": {"advisor.typed"}, "advisor.typed": {typed[0][0]}})


def class_names() -> dict[str, list[str]]:
    """Class name -> the modules defining a class of that name (nested classes included)."""
    out = defaultdict(list)
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                out[node.name].append(name)
    return out


def test_class_names_are_unique():
    """One name, one class across the product: a reader (or a grep) finds the class a name means."""
    assert {c: sorted(ms) for c, ms in class_names().items() if len(ms) > 1} == {}


# The root package hands out the Python API on first use (``from advisor import Advisor``).
ENTRY_POINTS = {("advisor", "advisor.api")}


def test_no_upward_imports():
    upward = [(a, b) for a, targets in graph(type_checking=True).items() for b in targets
              if layer_of(b) > layer_of(a) and (a, b) not in ENTRY_POINTS]
    assert upward == []


def test_no_private_names_across_modules():
    private = [(name, mod, sym) for name, path in MODULES.items()
               for mod, sym, _ in imports(name, path, type_checking=True)
               if sym and sym.startswith("_") and mod != name]
    assert private == []


def test_few_imports_inside_functions():
    assert function_imports() < MAX_FUNCTION_IMPORTS


def test_every_package_says_what_lives_there():
    for name, path in MODULES.items():
        if path.name == "__init__.py":
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            assert len(doc.split()) >= 12, f"{name}: package docstring too short"


def test_the_layers_catch_a_cycle_and_an_upward_import():
    assert cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}}) == [["x", "y", "z"]]
    assert layer_of("advisor.cli.main") > layer_of("advisor.selection.recommend")


# What the replay harness may not reach around the advise path for: capturing, running with a
# sketch, finding a stored one and deciding are ``advisor.serve``'s business (the micro-benchmarks
# of ``workloads.bench`` time capture and use on their own, on purpose).
SERVING = ("advisor.sketch.capture", "advisor.sketch.run", "advisor.sketch.apply", "advisor.sketch.sketched_scan",
           "advisor.sketch.lookup",
           "advisor.selection.recommend", "advisor.selection.decision_memory")


def test_the_replay_harness_serves_queries_only_through_the_advise_path():
    g = graph()
    direct = sorted((a, b) for a, targets in g.items() if a.startswith("workloads.replay")
                    for b in targets if b in SERVING)
    assert direct == []
    assert "advisor.serve.query_path" in g["workloads.replay.strategy_step"]
