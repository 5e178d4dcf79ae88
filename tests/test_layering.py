"""The package's import graph has no cycle: lower layers never import upper ones.

Every import counts — module level, inside functions and under ``TYPE_CHECKING`` — and importing
``advisorchain.tools.api`` counts as importing the subpackage ``advisorchain.tools`` too, because its
``__init__`` runs first. Only the root package (the public facade, which imports everything) is left
out as a parent.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "advisorchain"
PACKAGE = "advisorchain"


def _module_names() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _with_parents(name: str, known: dict[str, Path]) -> list[str]:
    """``name`` and each subpackage above it (the root package excluded) that is a known module."""
    parts = name.split(".")
    found = [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
    return [n for n in found if n in known]


def import_graph() -> dict[str, set[str]]:
    known = _module_names()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for target in targets:
                if target == PACKAGE or not target.startswith(PACKAGE + "."):
                    continue
                for dependency in _with_parents(target, known):
                    # A module's own enclosing packages are initialised before it: no edge.
                    if dependency != module and not module.startswith(dependency + "."):
                        graph[module].add(dependency)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ("advisorchain.messages", "advisorchain.model"),
        ("advisorchain.errors", "advisorchain.tools"),
        ("advisorchain.model", "advisorchain.advisors"),
        # The kernel (contracts, cursor, model link, run) never imports a built-in advisor.
        ("advisorchain.chain", "advisorchain.advisors"),
        ("advisorchain.chain", "advisorchain.client"),
        ("advisorchain.model", "advisorchain.tools"),
        ("advisorchain.advisors.api", "advisorchain.client"),
        ("advisorchain.advisors", "advisorchain.evaluation"),
        ("advisorchain.client", "advisorchain.evaluation"),
        ("advisorchain.evaluation.api", "advisorchain.client"),
        ("advisorchain.evaluation.api", "advisorchain.advisors"),
        ("advisorchain.advisors", "advisorchain.rag"),
        ("advisorchain.client", "advisorchain.rag"),
        ("advisorchain.observability", "advisorchain.rag"),
        ("advisorchain.client", "advisorchain.web"),
        ("advisorchain.advisors", "advisorchain.web"),
        ("advisorchain.web", "advisorchain.cli"),
        ("advisorchain._span_tree", "advisorchain.cli"),
        ("advisorchain.rag", "advisorchain.durable"),
        ("advisorchain.rag", "advisorchain.cli"),
        ("advisorchain.usage", "advisorchain.model"),
        ("advisorchain.usage", "advisorchain.models"),
        ("advisorchain._run_meter", "advisorchain.advisors"),
        ("advisorchain._run_meter", "advisorchain.client"),
        # Integrations stay at the edge: the core and the packages above it never reach them.
        ("advisorchain.client", "advisorchain.mcp"),
        ("advisorchain.client", "advisorchain.durable"),
        ("advisorchain.advisors", "advisorchain.models"),
        ("advisorchain.tools", "advisorchain.advisors"),
        ("advisorchain.tools", "advisorchain.client"),
        ("advisorchain.memory", "advisorchain.tools"),
        ("advisorchain.memory", "advisorchain.advisors"),
        ("advisorchain.evaluation", "advisorchain.rag"),
        ("advisorchain.evaluation", "advisorchain.web"),
        ("advisorchain.evaluation", "advisorchain.cli"),
        ("advisorchain.evaluation", "advisorchain.durable"),
        ("advisorchain.evaluation", "advisorchain.mcp"),
        ("advisorchain.rag", "advisorchain.web"),
        ("advisorchain.rag", "advisorchain.mcp"),
        ("advisorchain.rag", "advisorchain.evaluation"),
        ("advisorchain.web", "advisorchain.durable"),
        ("advisorchain.web", "advisorchain.mcp"),
        ("advisorchain.web", "advisorchain.rag"),
        ("advisorchain.web", "advisorchain.evaluation"),
        ("advisorchain.mcp", "advisorchain.durable"),
        ("advisorchain.mcp", "advisorchain.cli"),
        ("advisorchain.mcp", "advisorchain.web"),
        ("advisorchain.mcp", "advisorchain.rag"),
        ("advisorchain.durable", "advisorchain.cli"),
        ("advisorchain.durable", "advisorchain.web"),
        ("advisorchain.durable", "advisorchain.mcp"),
        # Agents sit on the chain and the tools: neither reaches them, and they never reach the client.
        ("advisorchain.advisors", "advisorchain.agents"),
        ("advisorchain.tools", "advisorchain.agents"),
        ("advisorchain.agents", "advisorchain.client"),
    ],
)
def test_lower_layers_never_reach_up(lower: str, upper: str) -> None:
    graph = import_graph()
    reached: set[str] = set()
    todo = [lower]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    assert not {m for m in reached if m == upper or m.startswith(upper + ".")}, f"{lower} reaches {upper}"


# -- the tests' own layering ----------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
SUPPORT = TESTS / "support"


def _test_imports(path: Path) -> set[str]:
    """The ``tests...`` modules the file at ``path`` imports."""
    module = ".".join(path.relative_to(TESTS.parent).with_suffix("").parts)
    return imported_test_modules(path.read_text(), module)


def imported_test_modules(text: str, module: str) -> set[str]:
    """The ``tests...`` modules that the source ``text`` of ``module`` imports (absolute or relative,
    wherever the import stands)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "tests"}
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, False, node)
            if base.split(".")[0] == "tests":
                found.add(base)
    return found


@pytest.mark.parametrize("path", sorted(SUPPORT.glob("*.py")), ids=lambda p: p.name)
def test_the_support_package_is_the_bottom_of_the_tests(path: Path) -> None:
    """Every test area may use tests.support; tests.support uses no test area (so any test, and
    any process a test starts, can import it without pulling a test module in)."""
    outside = {m for m in _test_imports(path) if not (m == "tests.support" or m.startswith("tests.support."))}
    assert outside == set(), f"{path.name} imports {sorted(outside)}"


def test_the_scripted_mcp_server_imports_nothing_from_the_tests() -> None:
    """It runs by path, from any working directory, with a minimal environment (no PYTHONPATH)."""
    assert _test_imports(SUPPORT / "mcp_server.py") == set()


def test_the_import_finder_sees_relative_and_absolute_test_imports() -> None:
    text = (
        "import json\nfrom advisorchain import tool\nfrom tests.web import web_helpers\n"
        "def f():\n    from ..durable import engines\nimport tests.cli.conftest\nfrom . import spans\n"
    )
    assert imported_test_modules(text, "tests.support.x") == {
        "tests.web",
        "tests.durable",
        "tests.cli.conftest",
        "tests.support",
    }


def private_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, module) for every import of another subpackage's private module: a module whose
    last name starts with ``_`` inside a subpackage that the importer is not part of."""
    found: list[tuple[str, str]] = []
    for module, dependencies in sorted(graph.items()):
        for dependency in sorted(dependencies):
            parts = dependency.split(".")
            if len(parts) < 3 or not parts[-1].startswith("_"):
                continue
            package = ".".join(parts[:-1])
            if module != package and not module.startswith(package + "."):
                found.append((module, dependency))
    return found


def test_no_module_imports_another_subpackages_private_module() -> None:
    """What two subpackages share has a non-private name (``tools.callbacks``, ``models.clients``...)."""
    assert private_imports(import_graph()) == []


def test_the_private_import_finder_sees_one() -> None:
    graph = {
        "advisorchain.rag.embeddings": {"advisorchain.models._http", "advisorchain.rag._calls"},
        "advisorchain.models.openai": {"advisorchain.models._http"},
        "advisorchain.web.app": {"advisorchain._sync"},
    }
    assert private_imports(graph) == [("advisorchain.rag.embeddings", "advisorchain.models._http")]



def test_per_run_state_lives_in_the_run_not_in_context_variables() -> None:
    """A request's state (its meter, memory's turn, the citation ledger) is the Run's; the package
    keeps two ContextVars: the run whose tools execute, and the trace collector's scope."""
    found = sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        for line in path.read_text().splitlines()
        if "ContextVar(" in line
    )
    assert found == ["_span_tree.py", "chain/run.py"], found
