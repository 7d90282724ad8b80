"""Declarations installed packages make in an entry-point group (``name = "module:OBJECT"``): the
field systems (``memory_lab.systems``) and the benchmarks (``memory_lab.benchmarks``)."""

from __future__ import annotations

import warnings
from typing import TypeVar

T = TypeVar("T")


def declared_in(group: str, kind: type[T], noun: str) -> list[T]:
    """Every object the group's entry points name that is a ``kind``; one that cannot be
    loaded, or is not a ``kind``, is skipped with a warning naming it (``noun``: what it is)."""
    from importlib import metadata  # 20 ms: not at ``import memory_lab``

    out = []
    for ep in metadata.entry_points(group=group):
        try:
            declared = ep.load()
        except Exception as exc:  # noqa: BLE001 - another package's import: say so, go on
            warnings.warn(f"{noun} {ep.name!r} ({ep.value}) not loaded: {exc}", stacklevel=3)
            continue
        if not isinstance(declared, kind):
            warnings.warn(f"{noun} {ep.name!r}: {ep.value} is not a {kind.__name__}", stacklevel=3)
            continue
        out.append(declared)
    return out
