"""A field system is one package, declared once: every stage reads its declaration, and the core
runs without any system, torch or PostgreSQL driver installed."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from memory_lab.cli import main
from memory_lab.memories import memory_factories, register_memory, unregister_memory
from memory_lab.memories.discover import builtin_systems, telemetry_switches
from memory_lab.memories.system import System
from memory_lab.models.offline_rules import declared
from memory_lab.telemetry import active

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
EXTRAS = PYPROJECT["optional-dependencies"]
MINI = ROOT / "tests" / "fixtures" / "dialogues" / "mini.yaml"


def test_every_system_is_found_with_its_declaration_and_nothing_lists_them():
    systems = {s.name: s for s in builtin_systems()}
    folders = sorted(p.name for p in (ROOT / "memory_lab/memories/systems").iterdir() if p.is_dir()
                     and (p / "__init__.py").is_file())  # fmt: skip
    assert sorted(systems) == folders
    assert {"mem0", "langmem", "graphiti", "hindsight", "cognee"} <= set(systems)
    factories = memory_factories()
    for system in systems.values():
        for name in system.memories:
            assert factories[name].system is system, name
        assert (ROOT / "docs" / system.docs).is_file(), system.docs
        assert system.licence and system.version and system.reference
    # no module of the shared stages names a system's package
    for path in (ROOT / "memory_lab").rglob("*.py"):
        if "memories/systems/" in path.as_posix():
            continue
        text = path.read_text("utf-8")
        assert not re.search(r"memories\.systems\.\w+", text), path


def test_each_system_s_extra_or_environment_is_declared_where_it_installs():
    for system in builtin_systems():
        if system.environment is not None:
            assert (ROOT / system.environment.constraints).is_file()
            assert system.extra is None
        else:
            assert system.extra in EXTRAS, system.name
            assert system.extra in EXTRAS["systems"][0], "the systems extra brings every system"


def test_every_system_s_telemetry_and_rule_script_reach_the_run():
    switches = telemetry_switches()
    for system in builtin_systems():
        assert system.telemetry.items() <= switches.items() <= active().items()
    memory_factories()  # the registry loaded: every memory's script declared
    scripts = {f"{type(s).__module__}:{type(s).__name__}" for s in declared()}
    assert {s.rules for s in builtin_systems()} <= scripts


@pytest.fixture
def absent_system():
    system = System(
        name="absent",
        title="Absent",
        upstream="absent-memory",
        version="1.0",
        licence="MIT",
        reference="https://example.org/absent",
        adapter=__name__,
        memories=("absent",),
        requires=("absent_memory_package",),
        extra="absent",
    )
    register_memory("absent", "a system this machine lacks", system=system)(lambda res: None)
    yield system
    unregister_memory("absent")


def test_a_memory_whose_system_is_missing_stops_the_run_in_one_line_exit_3(
    absent_system, tmp_path, capsys
):
    code = main(["run", "--memory", "absent", "--dialogues", str(MINI), "--out",
                 str(tmp_path / "r"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert err == [
        "memory-lab: error: memory 'absent' needs absent-memory 1.0 (module "
        "absent_memory_package is not installed): pip install 'memory-lab[absent]'"
    ]
    assert not (tmp_path / "r").exists()
    main(["list"])
    assert "not installed here: pip install 'memory-lab[absent]'" in capsys.readouterr().out


def test_memory_all_runs_what_is_installed_and_says_what_it_left_out(absent_system, capsys):
    from memory_lab.run.prepare import resolve_memories

    names = [s.name for s in resolve_memories(["all"])]
    assert "absent" not in names and "buffer" in names
    assert "absent (pip install 'memory-lab[absent]')" in capsys.readouterr().err


# What the core must not need: the field systems, torch and its models, the PostgreSQL drivers
EXTRA_MODULES = (
    "mem0", "langmem", "graphiti_core", "kuzu", "agentic_memory", "litellm", "torch",
    "sentence_transformers", "transformers", "psycopg", "psycopg_pool",
)  # fmt: skip
CORE = textwrap.dedent(
    """
    import sys
    class Absent:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ImportError(f"{{name}} is not installed (core install)")
    sys.meta_path.insert(0, Absent())
    from memory_lab.cli import main
    code = main(["run", "--memory", "buffer", "window:k=2", "vector", "summary", "hybrid",
                 "--dialogues", {mini!r}, "--out", {out!r}, "--quiet"])
    loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({blocked!r}))
    print("exit", code, "loaded", loaded)
    code = main(["run", "--memory", "mem0", "--dialogues", {mini!r}, "--out", {out!r} + "2"])
    print("exit", code)
    """
)


def test_the_core_runs_without_any_system_torch_or_postgres_driver(tmp_path):
    code = CORE.format(blocked=EXTRA_MODULES, mini=str(MINI), out=str(tmp_path / "r"))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = done.stdout.strip().splitlines()[-2:]
    assert first == "exit 0 loaded []", done.stderr[-3000:]
    assert second == "exit 3"
    assert "memory 'mem0' needs mem0ai 2.2.1" in done.stderr
    assert "pip install 'memory-lab[mem0]'" in done.stderr


# An installed package that declares a system: its memory, its rule script and its telemetry
# switch reach memory-lab through the memory_lab.systems entry point alone
PACKAGE = {
    "fakesys_ml/__init__.py": """
from memory_lab.memories import System

SYSTEM = System(
    name="fakesys", title="FakeSys", upstream="fake-sys", version="0.1", licence="MIT",
    reference="https://example.org/fakesys", adapter="fakesys_ml.adapter",
    memories=("fakesys",), telemetry={"FAKESYS_TELEMETRY": "off"},
    rules="fakesys_ml.rules:FakeScript",
)
""",
    "fakesys_ml/adapter.py": """
from langchain_core.messages import HumanMessage
from memory_lab.memories import Item, Recall, register_memory
from fakesys_ml import SYSTEM


class Notes:
    def __init__(self, model):
        self.model, self.notes = model, []

    def observe(self, exchange):
        reply = self.model.invoke([HumanMessage("FAKESYS NOTE THIS: " + exchange.user)])
        self.notes.append((str(reply.content), exchange.user_turn_id))

    def end_session(self, session): ...

    def recall(self, query):
        return Recall(tuple(Item(t, (i,) if i else ()) for t, i in self.notes))

    def snapshot(self):
        return {"notes": [t for t, _ in self.notes]}

    def close(self): ...


@register_memory("fakesys", "a system an installed package declares", roles=("memory",),
                 system=SYSTEM)
def fakesys(res):
    return Notes(res.memory_llm)
""",
    "fakesys_ml/rules.py": """
from memory_lab.models.offline_base import chat_result
from memory_lab.models.offline_rules import RuleScript


class FakeScript(RuleScript):
    name = "fakesys"

    def recognises(self, request):
        return "FAKESYS NOTE THIS: " in request.prompt

    def answer(self, request, settings):
        said = request.prompt.split("FAKESYS NOTE THIS: ", 1)[1]
        return chat_result(request.prompt, "noted: " + said.upper())
""",
    "fake_sys-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: fake-sys\nVersion: 0.1\n",
    "fake_sys-0.1.dist-info/entry_points.txt": (
        "[memory_lab.systems]\nfakesys = fakesys_ml:SYSTEM\n"
    ),
}
INSTALLED = textwrap.dedent(
    """
    import json, os, sys
    from memory_lab.cli import main
    from memory_lab.memories import memory_factories
    factory = memory_factories()["fakesys"]
    print(factory.system.upstream, factory.system.version, os.environ.get("FAKESYS_TELEMETRY"))
    assert main(["run", "--memory", "fakesys", "--dialogues", sys.argv[1], "--out", sys.argv[2],
                 "--quiet"]) == 0
    main(["list"])
    """
)


def test_an_installed_package_declares_a_system_through_its_entry_point(tmp_path):
    site = tmp_path / "site"
    for name, text in PACKAGE.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text.lstrip("\n"), "utf-8")
    done = subprocess.run(
        [sys.executable, "-c", INSTALLED, str(MINI), str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(site)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "fake-sys 0.1 off"  # found, its telemetry switch set when it registered
    assert "      system: fake-sys 0.1 (MIT), https://example.org/fakesys" in lines
    records = (tmp_path / "run" / "records.jsonl").read_text("utf-8")
    # the run's offline memory model answered the system's prompt by the system's own script
    assert re.search(r"noted: [A-Z][A-Z ,.'0-9]{10,}", records), records[:2000]
