"""The public API is listed once (``memory_lab._EXPORTS``): ``__all__``, the eager imports for
type checkers and the Python API page agree with it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import memory_lab

ROOT = Path(__file__).resolve().parent.parent


def _type_checking_imports() -> dict[str, str]:
    tree = ast.parse((ROOT / "memory_lab" / "__init__.py").read_text("utf-8"))
    block = next(
        n
        for n in tree.body
        if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
    )
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_every_public_name_resolves_and_all_lists_them():
    assert memory_lab.__all__ == sorted(memory_lab._EXPORTS)
    for name in memory_lab.__all__:
        assert getattr(memory_lab, name) is not None
    namespace: dict = {}
    exec("from memory_lab import *", namespace)
    assert set(memory_lab.__all__) <= set(namespace)


def test_type_checkers_see_the_same_names_from_the_same_modules():
    assert _type_checking_imports() == memory_lab._EXPORTS


def test_the_python_api_page_documents_every_public_name():
    page = (ROOT / "docs" / "api.md").read_text("utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)", page, re.M))
    missing = []
    for name in memory_lab.__all__:
        where = getattr(memory_lab, name).__module__
        if not {f"{where}.{name}", where} & documented:
            missing.append(f"{where}.{name}")
    assert missing == [], f"docs/api.md has no '::: ' entry for {missing}"
