"""Memories never know which provider answers: no offline model inside ``memory_lab/memories``.

The offline models (``offline:reader``, ``offline:memory``) are providers like ``openai:...``;
a memory calls ``invoke``, ``bind_tools`` and ``with_structured_output`` and the model decides
how to answer. So no module of ``memories/`` imports an offline model module (at the top or
inside a function) or names an offline class, not even in a comment or a docstring.

Two kinds of file are the offline model's side, kept beside the memories they answer: a field
system's rule script (``systems/<name>/rules.py``, never imported by its adapter: the
declaration names it as ``module:Class``), and the registry, which hands each registered
memory's declared script to the offline model. A memory's own ``rules="module:Class"``
declaration names one as a string.
"""

from __future__ import annotations

import ast
from pathlib import Path

import memory_lab

PACKAGE = Path(memory_lab.__file__).parent
MEMORIES = PACKAGE / "memories"
MODELS = PACKAGE / "models"


def offline_names() -> tuple[set[str], set[str]]:
    """The offline model modules (``models/offline_*``) and every ``Offline...`` class of
    ``models/``, as the package has them now."""
    modules = {p.stem for p in MODELS.glob("offline_*")}
    classes = {
        node.name
        for path in MODELS.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name.startswith("Offline")
    }
    return modules, classes


def offline_references(source: str) -> list[str]:
    """What in ``source`` refers to an offline model: imports of its modules, its classes."""
    modules, classes = offline_names()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            imported = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [n for n in imported if set(n.split(".")) & modules]
        found += [a.name for a in node.names if a.name in classes]
    found += [name for name in sorted(classes | modules) if name in source]
    return found


def test_the_scan_finds_offline_references_where_they_hide():
    lazy = "def f(model):\n    from memory_lab.models import offline_base\n    return model\n"
    assert offline_references(lazy)
    assert offline_references("from memory_lab.models import OfflineMemoryModel\n")
    assert offline_references('"""Uses OfflineChatModel offline."""\n')
    assert not offline_references("from memory_lab.text.analysis import kiwi\n")


def test_no_memory_refers_to_an_offline_model():
    modules, classes = offline_names()
    assert {"offline_base", "offline_memory", "offline_reader"} <= modules
    assert {"OfflineChatModel", "OfflineMemoryModel", "OfflineReader"} <= classes
    sources = sorted(MEMORIES.rglob("*.py"))
    assert len(sources) > 10
    offline_side = [p for p in sources if p.name == "rules.py" or p.name == "registry.py"]
    assert len(offline_side) >= 6
    found = {
        str(path.relative_to(MEMORIES)): refs
        for path in sources
        if path not in offline_side
        and (refs := offline_references(_without_rules_declarations(path)))
    }
    assert found == {}
    for path in sources:  # an adapter never imports its rule script
        if path.name != "rules.py":
            assert ".rules import" not in path.read_text(encoding="utf-8"), path


def _without_rules_declarations(path: Path) -> str:
    """The file's source without its ``rules="module:Class"`` declarations (strings)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.strip().startswith('rules="'))
