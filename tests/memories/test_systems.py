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
    register_memory("absent", "a system this machine lacks", system=system)(
        lambda res: None
    )
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
