"""The engine's import graph runs one way: a cycle among its modules fails here.

grimp (import-linter's graph builder) reads every import, ``TYPE_CHECKING`` ones and imports
inside functions included, so a verb that reaches back into ``runtime.py`` is caught."""

from __future__ import annotations

import grimp

ENGINE = "toolnexus_daemon.engine"


def _graph(package: str) -> dict[str, set[str]]:
    """Direct imports between the modules of ``package`` (of the daemon)."""
    graph = grimp.build_graph("toolnexus_daemon", include_external_packages=False, cache_dir=None)
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def _engine_graph() -> dict[str, set[str]]:
    return _graph(ENGINE)


def _cycle(edges: dict[str, set[str]]) -> list[str]:
    """One import cycle (as a path that returns to its start), or [] when there is none."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return []

    for m in sorted(edges):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycle_in_the_engine() -> None:
    edges = _engine_graph()
    assert f"{ENGINE}.verbs.runtime" in edges and edges[f"{ENGINE}.verbs.runtime"], "the graph was not built"
    cycle = _cycle(edges)
    assert not cycle, "import cycle in the engine: " + " -> ".join(cycle)


def test_no_verb_imports_the_runtime() -> None:
    """Verbs are functions over the owners (engine/turn/context.py), never over the whole Runtime."""
    edges = _engine_graph()
    importers = sorted(m for m, deps in edges.items() if f"{ENGINE}.verbs.runtime" in deps)
    assert importers == [f"{ENGINE}.verbs.engine"], importers


def test_no_import_cycle_in_the_daemon_package() -> None:
    cycle = _cycle(_graph("toolnexus_daemon"))
    assert not cycle, "import cycle in the daemon: " + " -> ".join(cycle)
