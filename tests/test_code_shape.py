"""The package's shape: no function over 100 lines, no import cycle among its modules, and
every import going down the stages (a stage imports only its own and earlier stages).

Read from the source with ``ast`` (nothing is imported). The allowances name what is still being
split or untangled elsewhere; an entry that is fixed fails the test too, so they only shrink.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "memory_lab"
MAX_LINES = 100

# The stages in the order data flows through them; a module of one may import only modules of
# its own stage or an earlier one (the package's __init__ is the facade and exempt).
STAGES = (
    "errors",
    "telemetry",
    "work_clock",
    "heap",
    "text",
    "entry_points",
    "benchmarks",  # the declaration and discovery (memory_lab.benchmarks, .declaration)
    "dialogue",
    "models",
    "memories",
    "scoring",
    "log",
    "results",
    "run",
    "views",
    "benchmarks.*",  # each benchmark's package: reads every stage, none reads it (found by
    # its declaration: memory_lab.benchmarks imports it by name, never by an import statement)
    "sweep",  # runs of memory-lab run, and reports over their folders
    "serve",
    "cli",
)

# functions over MAX_LINES still being split (issue 21): "path::qualified name"
KNOWN_LONG: set[str] = set()
# module-level import cycles still to remove, each as its sorted modules
KNOWN_CYCLES: set[tuple[str, ...]] = set()
# cycles closed only by imports inside functions (deferred imports) still to remove
KNOWN_DEFERRED_CYCLES: set[tuple[str, ...]] = set()


def modules() -> dict[str, tuple[Path, ast.Module]]:
    """Every module of the package by dotted name (a package by its own name), parsed."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = (path, ast.parse(path.read_text("utf-8"), str(path)))
    return found


def long_functions(tree: ast.Module) -> dict[str, int]:
    """Qualified name -> lines, for every function or method longer than MAX_LINES."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                lines = child.end_lineno - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and lines > MAX_LINES:
                    found[name] = lines
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.Module, deferred: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements run when the module is imported (under ``if``/``try`` too, never
    under ``if TYPE_CHECKING:``); with ``deferred`` also those inside functions and classes."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            elif isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit(ast.Module(body=[other], type_ignores=[]))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if deferred:
                    visit(child)
            elif isinstance(child, ast.stmt):
                visit(child)

    visit(tree)
    return found


def import_graph(deferred: bool = False) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from pkg import mod`` counts ``pkg.mod``)."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, (path, tree) in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in imports(tree, deferred):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            targets.add(source)
            targets.update(f"{source}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in mods and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[tuple[str, ...]] = set()

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.add(tuple(sorted(group)))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def _described(found: set[tuple[str, ...]], graph: dict[str, set[str]]) -> str:
    lines = []
    for group in sorted(found):
        edges = [f"{a} -> {b}" for a in group for b in sorted(graph[a] & set(group))]
        lines.append(" <-> ".join(group) + " (" + ", ".join(edges) + ")")
    return "\n".join(lines)


def test_no_function_in_the_package_is_over_100_lines():
    found = {}
    for path, tree in modules().values():
        where = path.relative_to(PACKAGE.parent).as_posix()
        found.update({f"{where}::{name}": n for name, n in long_functions(tree).items()})
    new = {name: n for name, n in found.items() if name not in KNOWN_LONG}
    assert not new, "functions over 100 lines (split them):\n" + "\n".join(
        f"  {name}: {n} lines" for name, n in sorted(new.items())
    )
    fixed = KNOWN_LONG - set(found)
    assert not fixed, f"no longer over 100 lines, remove from KNOWN_LONG: {sorted(fixed)}"


def test_no_import_cycle_among_the_packages_modules():
    graph = import_graph()
    found = cycles(graph)
    assert not found - KNOWN_CYCLES, "import cycles:\n" + _described(found - KNOWN_CYCLES, graph)
    assert not KNOWN_CYCLES - found, f"gone, remove from KNOWN_CYCLES: {KNOWN_CYCLES - found}"


def test_no_import_cycle_even_through_imports_inside_functions():
    graph = import_graph(deferred=True)
    found = cycles(graph) - cycles(import_graph())
    new = found - KNOWN_DEFERRED_CYCLES
    assert not new, "import cycles through imports in functions:\n" + _described(new, graph)
    gone = KNOWN_DEFERRED_CYCLES - found
    assert not gone, f"gone, remove from KNOWN_DEFERRED_CYCLES: {gone}"


def stage_of(module: str) -> int | None:
    """Where ``memory_lab.STAGE[.rest]`` sits in STAGES; None for the package itself."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "benchmarks" and parts[2] != "declaration":
        return STAGES.index("benchmarks.*")
    return STAGES.index(parts[1]) if len(parts) > 1 else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a stage to a later one, as "module -> module"."""
    found = []
    for name, targets in sorted(graph.items()):
        here = stage_of(name)
        for target in sorted(targets):
            there = stage_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{name} -> {target}")
    return found


def test_every_module_belongs_to_a_stage():
    strays = [
        name for name in modules() if name != "memory_lab" and name.split(".")[1] not in STAGES
    ]
    assert not strays, f"modules outside the stages (put each in its stage's package): {strays}"


def test_imports_run_only_down_the_stages_even_inside_functions():
    found = upward_imports(import_graph(deferred=True))
    assert not found, "imports back up the stages:\n" + "\n".join(found)


def test_the_checks_see_long_functions_and_cycles():
    """The checkers themselves: a long method is found by its qualified name, and a cycle
    through a deferred import counts only when deferred imports do."""
    body = "\n".join(f"        x = {i}" for i in range(MAX_LINES))
    tree = ast.parse(f"class A:\n    def long(self):\n{body}\n    def short(self):\n        pass\n")
    assert long_functions(tree) == {"A.long": MAX_LINES + 1}
    code = "import a\nif TYPE_CHECKING:\n    import b\ndef f():\n    import c\n"
    tree = ast.parse(code)
    assert [n.names[0].name for n in imports(tree, deferred=False)] == ["a"]
    assert [n.names[0].name for n in imports(tree, deferred=True)] == ["a", "c"]
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == {("a", "b", "c")}
    staged = {
        "memory_lab.views.report": {"memory_lab.text.redact"},
        "memory_lab.results.read": {"memory_lab.run.cell", "memory_lab"},
    }
    assert upward_imports(staged) == ["memory_lab.results.read -> memory_lab.run.cell"]
