"""Imports point one way (#17): no import cycle among ``knn``'s modules, and no module
imports a layer above its own.

Every ``import`` and ``from ... import`` of every module counts, wherever it is:
at module level, inside a function or a class, under ``if TYPE_CHECKING``. An
import inside a function still runs, so one that closes a cycle only hides it
until the function is first called.

The graph is one of modules: ``from knn.train import dist`` is an edge to
``knn.train.dist`` when that is a module, and ``from knn.tasks import TASKS``
an edge to ``knn.tasks`` (its ``__init__``). Importing a submodule also runs
its packages' ``__init__`` files; those implicit edges are left out (they
would make every package a cycle with its own modules), so a package's
``__init__`` is held to its package's layer like any module in it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import knn

PACKAGE_DIR = Path(knn.__file__).resolve().parent

#: Layers, bottom to top. A module may import its own layer and the layers below it,
#: never one above. Within a layer the cycle check keeps the imports one way.
#:
#: * ``knn`` (the empty root ``__init__``, which every import runs first), and the
#:   plain helpers every layer may use: errors the user sees as one line, atomic
#:   writes, the repository's location, data-parallel process-group helpers.
#: * ``knn.ops``: dispatching ops (fused scan, oneDNN products).
#: * ``knn.kernels``: reference kernels (the exact sums the layers are checked against).
#: * ``knn.featurize``: molecules to graphs.
#: * ``knn.data``: data files, corpora, datasets (molecule datasets hold featurized graphs).
#: * ``knn.layers``: kernel-network layers (the graph layers take featurized batches).
#: * ``knn.models``: models built from layers.
#: * ``knn.tasks``: what the trainer trains on (data + model family + loss + metrics).
#: * ``knn.train``: the shared trainer.
#: * tools and entry points: the experiment tooling in ``knn.tools`` (report, results
#:   registry, nightly, benchmarks, throughput, Table 3 writer, run summary), the
#:   user-facing ``knn.predict`` and ``python -m knn.train``; nothing below imports them.
LAYERS: list[tuple[str, ...]] = [
    ("knn", "knn.errors", "knn.io", "knn.paths", "knn.dist"),
    ("knn.ops",),
    ("knn.kernels",),
    ("knn.featurize",),
    ("knn.data",),
    ("knn.layers",),
    ("knn.models",),
    ("knn.tasks",),
    ("knn.train",),
    ("knn.tools", "knn.predict", "knn.train.__main__"),
]


def module_name(path: Path, root: Path) -> str:
    """``knn/train/loop.py`` -> ``knn.train.loop``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Every module of the package (its ``.py`` files), by dotted name."""
    return {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))}


def imported_names(source: str, module: str, is_package: bool) -> set[str]:
    """The dotted names the ``import`` statements anywhere in ``source`` ask for, relative
    imports resolved against ``module``: ``import a.b`` gives ``a.b``, ``from a import b``
    gives ``a.b`` (:func:`resolve` maps it to ``a`` when ``b`` is not a module)."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):  # all nodes: function and class bodies too
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from . import x, from ..y import z
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                parent = ".".join(base + ([node.module] if node.module else []))
            else:
                parent = node.module or ""
            names.update(parent if alias.name == "*" else f"{parent}.{alias.name}"
                         for alias in node.names)
    return names


def resolve(name: str, modules: Iterable[str]) -> str | None:
    """The module ``name`` loads: itself if it is one, else its longest prefix that is
    (``knn.tasks.TASKS`` -> ``knn.tasks``); None outside the package."""
    known = set(modules)
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """module -> the package modules it imports (itself left out)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {resolve(n, modules) for n in
                   imported_names(path.read_text(), name, path.name == "__init__.py")}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per strongly connected component that has one, each as a path
    ``[a, b, ..., a]`` (Tarjan's algorithm, then a path around the component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_cycle_through(sorted(c), graph) for c in components)


def _cycle_through(component: list[str], graph: Mapping[str, Iterable[str]]) -> list[str]:
    """A path from the component's first module back to itself, inside the component."""
    start, members = component[0], set(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:  # breadth-first: the shortest way back to ``start``
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:  # v closes the cycle: walk back from v to start
                    back = [v]
                    while back[-1] != start:
                        back.append(parent[back[-1]])
                    return [*reversed(back), start]
                if w in members and w not in parent and w != start:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {component}")


def layer_of(module: str, layers: list[tuple[str, ...]] = LAYERS) -> int | None:
    """The index of ``module``'s layer: an exact entry first (tools inside ``knn.train``),
    else the longest entry that is a package prefix of it; None when unlisted."""
    exact = [i for i, layer in enumerate(layers) if module in layer]
    if exact:
        return exact[0]
    best: tuple[int, int] | None = None
    for i, layer in enumerate(layers):
        for entry in layer:
            if entry != "knn" and module.startswith(entry + "."):
                if best is None or len(entry) > best[0]:
                    best = (len(entry), i)
    return None if best is None else best[1]


def upward_imports(graph: Mapping[str, Iterable[str]],
                   layers: list[tuple[str, ...]] = LAYERS) -> list[str]:
    """Edges from a lower layer to a higher one, as ``a (layer) -> b (layer)`` lines."""
    out = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            la, lb = layer_of(a, layers), layer_of(b, layers)
            if la is not None and lb is not None and lb > la:
                out.append(f"{a} (layer {la}) -> {b} (layer {lb})")
    return out


# --------------------------------------------------------------------------- #
# The checker, on small made-up cases (including import cycles)
# --------------------------------------------------------------------------- #


def test_cycle_finder_names_the_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"a"}}) == [["a", "a"]]
    two = find_cycles({"x": {"y"}, "y": {"x"}, "p": {"q"}, "q": {"r"}, "r": {"q"}})
    assert two == [["q", "r", "q"], ["x", "y", "x"]]


def test_function_level_and_relative_imports_are_edges() -> None:
    """Before #17 the tasks imported the trainer inside functions; that is still an edge."""
    source = (
        "from knn.tasks.base import StepResult\n"
        "def setup(self):\n"
        "    from knn.train import dist  # here: knn.train imports knn.tasks\n"
        "    from knn.train.config import ConfigError\n"
        "class C:\n"
        "    def f(self):\n"
        "        from . import base\n"
        "        from ..models import graph\n"
        "        import knn.data.ptb\n"
    )
    modules = ["knn", "knn.tasks", "knn.tasks.base", "knn.tasks.lm", "knn.train", "knn.train.dist",
               "knn.train.config", "knn.models", "knn.models.graph", "knn.data", "knn.data.ptb"]
    names = imported_names(source, "knn.tasks.lm", is_package=False)
    assert {resolve(n, modules) for n in names} == {
        "knn.tasks.base", "knn.train.dist", "knn.train.config", "knn.models.graph", "knn.data.ptb"}
    assert resolve("knn.tasks.TASKS", modules) == "knn.tasks"
    assert resolve("torch.nn", modules) is None


def test_the_checker_catches_the_cycles_issue_17_removed() -> None:
    """The imports as they were: tasks <-> train (ConfigError, dist, TASKS) and
    graph <-> graph_baselines (RegressionHead)."""
    before = {
        "knn.tasks": {"knn.tasks.lm"},
        "knn.tasks.lm": {"knn.train.dist", "knn.train.config"},
        "knn.train": {"knn.train.config"},
        "knn.train.config": {"knn.tasks"},
        "knn.train.dist": set(),
        "knn.models.graph": {"knn.models.graph_baselines"},
        "knn.models.graph_baselines": {"knn.models.graph"},
    }
    assert find_cycles(before) == [
        ["knn.models.graph", "knn.models.graph_baselines", "knn.models.graph"],
        ["knn.tasks", "knn.tasks.lm", "knn.train.config", "knn.tasks"],
    ]
    assert upward_imports(before) == [
        "knn.tasks.lm (layer 7) -> knn.train.config (layer 8)",
        "knn.tasks.lm (layer 7) -> knn.train.dist (layer 8)",
    ]


def test_layer_lookup() -> None:
    assert layer_of("knn") == 0 and layer_of("knn.dist") == 0
    assert layer_of("knn.train.loop") == layer_of("knn.train") == 8
    assert layer_of("knn.tools.throughput") == layer_of("knn.tools.bench") == len(LAYERS) - 1
    assert layer_of("knn.models.heads") == 6
    assert layer_of("knn.newthing") is None


# --------------------------------------------------------------------------- #
# The package itself
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(package_modules())


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    unplaced = sorted(m for m in graph if layer_of(m) is None)
    assert not unplaced, f"add these modules to a layer in tests/test_imports.py: {unplaced}"


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    cycles = [" -> ".join(c) for c in find_cycles(graph)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_import_from_a_lower_layer_to_a_higher_one(graph: dict[str, set[str]]) -> None:
    upward = upward_imports(graph)
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_the_graph_sees_the_package(graph: dict[str, set[str]]) -> None:
    """The walk finds the modules and edges it must (a guard against a vacuous pass)."""
    assert {"knn.train.loop", "knn.tasks.molecules", "knn.dist", "knn.train.__main__"} <= set(graph)
    assert {"knn.tasks", "knn.dist", "knn.io"} <= graph["knn.train.loop"]
    assert {"knn.models.graph", "knn.models.graph_baselines", "knn.paths"} <= graph["knn.models"]
