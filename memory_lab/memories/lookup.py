"""The registered memories and how a name finds one.

The built-in memories and the field systems' adapters (found by ``discover``, not listed) are
imported the first time the registry is asked (``registered``); installed packages name a
module in the ``memory_lab.memories`` entry-point group (or declare a system in
``memory_lab.systems``), and a ``module:factory`` source is imported on use (``import_source``),
so it also works in ``--jobs`` and Ray workers and on ``--resume``.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import replace
from importlib import metadata

from memory_lab.memories.factory import MemoryFactory, declare_factory
from memory_lab.memories.params import MemorySpecError
from memory_lab.memories.sources import ENTRY_POINT_GROUP

BUILTIN_PACKAGE = "memory_lab.memories"  # memories defined in it are recorded without a source

_REGISTRY: dict[str, MemoryFactory] = {}
_LOADED = False  # the built-in memories and systems' adapters imported (at the first lookup)


def registered() -> dict[str, MemoryFactory]:
    """The registered memories, the built-in modules and the field systems' adapters imported
    first (their memories first: built-ins in module order, then the systems by name)."""
    global _LOADED
    if not _LOADED:
        from memory_lab.memories import discover

        modules = [*discover.builtin_modules(), *(s.adapter for s in discover.builtin_systems())]
        for module in modules:
            importlib.import_module(module)  # raises: tried again at the next lookup
        _LOADED = True
        # in module order, whichever a program imported first; the others after them
        rank = {module: i for i, module in enumerate(modules)}
        ordered = sorted(_REGISTRY.values(), key=lambda f: rank.get(f.build.__module__, len(rank)))
        _REGISTRY.clear()
        _REGISTRY.update((f.name, f) for f in ordered)
    return _REGISTRY


def is_builtin_module(module: str) -> bool:
    """Whether ``module`` is memory-lab's own memories' (built in, registered wherever
    ``memory_lab`` is imported)."""
    return module == BUILTIN_PACKAGE or module.startswith(BUILTIN_PACKAGE + ".")


def add_factory(factory: MemoryFactory, builtin: bool) -> None:
    """Register ``factory`` under its name: a built-in as its module is imported; another
    memory after the built-ins, so it may replace one of them."""
    registry = _REGISTRY if builtin else registered()
    registry[factory.name] = factory


def unregister_memory(name: str) -> None:
    """Remove a registered memory (for notebooks and tests that register their own)."""
    registered().pop(name, None)


def memory_factories() -> dict[str, MemoryFactory]:
    """All known memories, by name: built-ins first, then installed and registered ones."""
    from memory_lab.memories import discover

    for system in discover.installed_systems():
        if not any(name in registered() for name in system.memories) or not system.memories:
            try:
                importlib.import_module(system.adapter)
            except ImportError as exc:
                raise MemorySpecError(
                    f"system '{system.name}': cannot import its adapter {system.adapter!r}: {exc}"
                ) from None
    for ep in entry_points():
        if ep.name not in registered():
            try:
                import_source(ep.value, ep.name)
            except MemorySpecError:
                continue
    return dict(registered())


def entry_points() -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def import_source(source: str, name_hint: str | None = None) -> MemoryFactory:
    """Import ``module:attr`` and return the memory it defines (registering it if needed)."""
    module_name, _, attr = source.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MemorySpecError(f"memory '{source}': cannot import {module_name!r}: {exc}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise MemorySpecError(f"memory '{source}': module {module_name!r} has no {attr!r}")
    if isinstance(obj, MemoryFactory):
        factory = obj
    else:
        name = getattr(obj, "memory_name", None)
        found = registered().get(name) if name else None
        if found is not None and found.build is obj:
            factory = found
        elif callable(obj):
            doc = (inspect.getdoc(obj) or "").split("\n")[0]
            try:  # any callable is taken for a factory: one that is not is bad input
                factory = declare_factory(name or name_hint or attr, obj, doc or source)
            except (TypeError, ValueError) as exc:  # ValueError: no signature (a builtin)
                raise MemorySpecError(
                    f"memory '{source}': {attr!r} is not a memory factory ({exc})"
                ) from None
        else:
            raise MemorySpecError(f"memory '{source}': {attr!r} is not a memory factory")
    factory = replace(factory, source=source)
    registered()[factory.name] = factory
    return factory


def factory_for(name: str, source: str | None = None) -> MemoryFactory:
    """The registered factory for a name, importing ``source`` or an entry point when needed."""
    if name in registered():
        return registered()[name]
    if source:
        return import_source(source, name)
    for ep in entry_points():
        if ep.name == name:
            return import_source(ep.value, name)
    known = ", ".join(memory_factories()) or "none registered"
    raise MemorySpecError(f"unknown memory {name!r} (known: {known}; or give module:factory)")
