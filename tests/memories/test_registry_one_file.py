"""One registration path: a one-file memory under every executor and on resume; no import cycle.

The memory below is what a user writes: one module on ``PYTHONPATH`` with ``@register_memory``,
named on the command line as ``module:factory``. Its cells run in Ray tasks that import it from
that name (``--jobs`` workers and ``--resume``: ``tests/memories/test_protocol.py``).
The built-ins register through the same decorator, from modules the registry never imports by
name, and are recorded without a source.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_lab.cli import main
from memory_lab.memories import (
    memory_factories,
    parse_memory_spec,
    unregister_memory,
)
from memory_lab.memories.discover import builtin_modules, builtin_systems
from memory_lab.results.read import read_records

from ..fault_runs import records_of

PACKAGE = Path(__file__).resolve().parents[2] / "memory_lab" / "memories"

LAST_LINES = '''\
"""The user's last k lines (dated when the run has timestamps on)."""

from memory_lab.memories import TextMemory, register_memory


class LastLines(TextMemory):
    k: int = 2
    lines: list[str] = []

    def context(self, query: str) -> str:
        return "\\n".join(f"Human: {line}" for line in self.lines[-self.k :])

    def remember(self, user: str, assistant: str) -> None:
        if user:
            self.lines.append(user)


@register_memory("last_lines", "The user's last k lines.", {"k": "lines shown"})
def last_lines(res, k: int = 2) -> LastLines:
    return LastLines(k=k)
'''
# Korean and short: the offline reader loads no English sentence model in the workers
DATED = """\
format: memory-lab/dialogue@1
id: ko-dated
language: ko
sessions:
  - id: s1
    date: "2026-04-01"
    turns:
      - user: "안녕하세요, 저는 서연이에요. 대전에서 카페를 준비하고 있어요."
      - assistant: "반가워요, 서연 씨!"
      - user: "개업일은 5월 10일로 정했어요."
        id: opening
      - assistant: "얼마 남지 않았네요."
  - id: s2
    date: "2026-04-15"
    turns:
      - user: "요즘 인테리어 때문에 바빠요."
      - assistant: "힘내세요."
probes:
  - id: q-open
    question: "개업일이 언제예요?"
    answers: ["5월 10일"]
    evidence: [opening]
    category: single-hop
"""
SPEC = "last_lines_mod:last_lines:k=2"
LABEL = "last_lines:k=2"


@pytest.fixture
def one_file_memory(tmp_path, monkeypatch):
    """``last_lines_mod.py`` importable here and in every worker; forgotten afterwards."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "last_lines_mod.py").write_text(LAST_LINES, "utf-8")
    monkeypatch.syspath_prepend(str(folder))
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))  # --jobs and Ray workers
    yield folder
    forget()


def forget() -> None:
    unregister_memory("last_lines")
    sys.modules.pop("last_lines_mod", None)


def run(dialogues: str, out: Path, *extra: str) -> int:
    argv = ["run", "--memory", SPEC, "buffer", "--dialogues", dialogues, "--out", str(out)]
    return main([*argv, "--quiet", *extra])


def dated(tmp_path: Path) -> str:
    (tmp_path / "dated.yaml").write_text(DATED, "utf-8")
    return str(tmp_path / "dated.yaml")


def test_a_one_file_memory_runs_as_ray_tasks(one_file_memory, tmp_path):
    pytest.importorskip("ray")
    one_job = tmp_path / "one-job"
    assert run(dated(tmp_path), one_job) == 0
    forget()  # the Ray tasks import the module from the spec's name, as --jobs workers do
    out = tmp_path / "ray"
    assert run(dated(tmp_path), out, "--executor", "ray", "--jobs", "2") == 0
    assert records_of(out) == records_of(one_job)
    turns = [r for r in read_records(out) if r["type"] == "turn" and r["memory"] == LABEL]
    assert turns and any("Human: [2026-04-01] " in t["prompt"] for t in turns)  # timestamps on
    specs = json.loads((out / "run.json").read_text("utf-8"))["memory_specs"]
    assert [(s["label"], s["source"]) for s in specs] == [
        (LABEL, "last_lines_mod:last_lines"),
        ("buffer", None),  # a built-in is recorded without a source, as before
    ]


def test_a_memory_imported_by_hand_is_known_by_name_with_its_source(one_file_memory):
    import last_lines_mod  # noqa: F401 - its decorator registers the memory

    by_name = parse_memory_spec("last_lines:k=2")
    assert by_name == parse_memory_spec(SPEC)
    assert by_name.source == "last_lines_mod:last_lines"
    assert list(memory_factories())[-1] == "last_lines"  # after the built-ins


def test_a_bare_factory_without_the_decorator_still_works_as_module_factory(tmp_path, monkeypatch):
    (tmp_path / "bare_mod.py").write_text(
        "def shout(res, k: int = 1):\n    '''Says nothing.'''\n    return None\n", "utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        spec = parse_memory_spec("bare_mod:shout:k=3")
        assert (spec.name, spec.params, spec.source) == ("shout", {"k": 3}, "bare_mod:shout")
        assert memory_factories()["shout"].description == "Says nothing."
    finally:
        unregister_memory("shout")
        sys.modules.pop("bare_mod", None)


def memory_imports(path: Path) -> tuple[set[str], set[str]]:
    """The ``memory_lab.memories`` modules ``path`` imports: (at module level, anywhere)."""
    tree = ast.parse(path.read_text("utf-8"))
    top, anywhere = set(), set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
            if node.module in ("memory_lab.memories", "memory_lab.memories.systems"):
                names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found = {n for n in names if n.startswith("memory_lab.memories.")}
        anywhere |= found
        if node in tree.body:
            top |= found
    return top, anywhere


# the registry's modules: registering, a factory's parameters, a registered memory, finding one
# by name, specs, and what a run does with them
REGISTRY = ("registry", "params", "factory", "lookup", "specs", "build")


def test_the_registry_imports_no_memory_and_the_module_imports_have_no_cycle():
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        top, anywhere = memory_imports(path)
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(("memory_lab", "memories", *parts)).removesuffix(".__init__")
        graph[name] = top
        if path.stem in ("protocol", *REGISTRY):  # the contract and the registry: no memory
            # (sources.py: which recorded sources a resume may import, part of the contract)
            # (discover.py and system.py: where memories are found, what a system declares)
            contract = {
                f"memory_lab.memories.{m}"
                for m in ("protocol", "sources", "discover", "system", *REGISTRY)
            }
            assert anywhere <= contract, (path.stem, anywhere)
    modules = {*builtin_modules(), *(s.adapter for s in builtin_systems())}
    assert modules < set(graph)
    # no system's package imports another's: each is one package, its shared parts in memories/
    for module, imports in graph.items():
        if module.startswith("memory_lab.memories.systems."):
            own = ".".join(module.split(".")[:4])
            others = {i for i in imports if i.startswith("memory_lab.memories.systems.")}
            assert {".".join(i.split(".")[:4]) for i in others} <= {own}, (module, others)
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module not in done:
            for child in graph.get(module, ()):
                visit(child, (*path, module))
            done.add(module)

    for module in graph:
        visit(module, ())


FRESH = """
import sys
first = sys.argv[1:]
for name in first:
    __import__(name)
from memory_lab.memories.discover import builtin_modules, builtin_systems
from memory_lab.memories.registry import memory_factories
modules = (*builtin_modules(), *(s.adapter for s in builtin_systems()))
if not first:  # the package alone: no memory module, none of their libraries
    loaded = [m for m in (*modules, "langchain_classic", "langgraph") if m in sys.modules]
    assert not loaded, loaded
factories = memory_factories()
print(",".join(factories))
print(",".join(sorted({str(f.source) for f in factories.values()})))
"""


@pytest.mark.parametrize(
    "first",
    [
        (),
        ("memory_lab.memories.systems.mem0.adapter", "memory_lab.memories.builtin.classic_extras"),
        ("memory_lab.memories.registry", "memory_lab.memories.builtin.lg_store"),
    ],
    ids=["package", "mem0-first", "registry-first"],
)
def test_any_import_order_in_a_fresh_interpreter_lists_the_built_ins_alike(first):
    done = subprocess.run(
        [sys.executable, "-c", FRESH, *first], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names, sources = done.stdout.splitlines()[-2:]
    modules = {*builtin_modules(), *(s.adapter for s in builtin_systems())}
    here = [n for n, f in memory_factories().items() if f.build.__module__ in modules]
    assert names.split(",") == here  # the order of `memory-lab list` and `--memory all`
    assert here[:5] == ["buffer", "window", "summary", "summary_buffer", "vector"]
    assert len(here) >= 15 and sources == "None"
