"""Memory registry: a snake_case name -> a factory with typed, defaulted, validated parameters.

The factory contract is one signature: ``factory(res: MemoryResources, **params) -> Memory``
(or anything ``as_memory`` adapts, such as a LangChain ``BaseMemory``). Parameters are the
factory's keyword arguments: annotated ``int``, ``float``, ``str``, ``bool``, ``list[...]`` of
those, or ``Literal[...]`` choices, each with a default; bounds are declared with ``ParamDoc``.
Specs are checked when parsed, so ``window:k=-1`` fails before a results folder is made.

There is one way to register a memory, ``@register_memory``, for the built-ins and everyone
else. The built-in memories and the field systems' adapters (found by ``discover``, not listed)
register when the registry is first asked; installed packages name a module in the
``memory_lab.memories`` entry-point group (or declare a system in ``memory_lab.systems``), and a
``module:factory`` spec imports its module on use (so it also works in ``--jobs`` and Ray
workers and on ``--resume``), whose decorator registers it. A memory may bring the offline
model's rule script for its own prompts (``rules``; a system's comes with its declaration),
passed on to the offline memory model as it registers. This module imports no memory.

The registry's parts, each a module of its own (all importable from here): a factory's
parameters (``params``: ``ParamDoc``, ``Param``, ``MemorySpecError``), a registered memory as
declared from its signature (``factory``: ``MemoryFactory``), the registered memories and how a
name finds one (``lookup``: ``memory_factories``, ``factory_for``), specs naming them
(``specs``: ``MemorySpec``, ``parse_memory_spec``, ``spec_from_json``) and what a run does with
specs (``build``: ``preflight_memories``, ``prepare_memories``, ``build_memory``); this module
registers (``register_memory``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory_lab import telemetry
from memory_lab.memories.build import (
    build_memory,
    check_installed,
    preflight_memories,
    prepare_memories,
)
from memory_lab.memories.factory import MemoryFactory, Persistent, Preflight, declare_factory
from memory_lab.memories.lookup import (
    BUILTIN_PACKAGE,
    add_factory,
    factory_for,
    is_builtin_module,
    memory_factories,
    unregister_memory,
)
from memory_lab.memories.params import INT_LIMIT, LIST_SEPARATOR, MemorySpecError, Param, ParamDoc
from memory_lab.memories.specs import MemorySpec, make_spec, parse_memory_spec, spec_from_json

__all__ = [
    "BUILTIN_PACKAGE",
    "INT_LIMIT",
    "LIST_SEPARATOR",
    "MemoryFactory",
    "MemorySpec",
    "MemorySpecError",
    "Param",
    "ParamDoc",
    "Persistent",
    "Preflight",
    "build_memory",
    "check_installed",
    "factory_for",
    "is_builtin_module",
    "make_spec",
    "memory_factories",
    "parse_memory_spec",
    "preflight_memories",
    "prepare_memories",
    "register_memory",
    "spec_from_json",
    "unregister_memory",
]


def _hand_rules(rules: str) -> None:
    """Hand a memory's rule script (``module:Class``) to the offline memory model: it answers
    the memory's prompts by it from now on."""
    from memory_lab.models.offline_rules import declare

    declare(rules)


def _source_of(fn: Callable[..., Any]) -> str | None:
    """``module:name`` to import ``fn`` from in another process; None for a built-in (its
    package registers it wherever ``memory_lab`` is imported) and for what cannot be imported
    by name (``__main__``, a function defined inside another)."""
    module = getattr(fn, "__module__", None) or "__main__"
    if module == "__main__" or "<locals>" in getattr(fn, "__qualname__", "<locals>"):
        return None
    if is_builtin_module(module):
        return None
    return f"{module}:{fn.__name__}"


def register_memory(
    name: str,
    description: str,
    params: dict[str, ParamDoc | str] | None = None,
    roles: tuple[str, ...] = (),
    preflight: Preflight | None = None,
    roles_of: Callable[[dict[str, Any]], tuple[str, ...]] | None = None,
    stack: tuple[str, ...] = (),
    persistent: Persistent | None = None,
    system: Any = None,
    rules: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``factory(res, **params)`` under ``name`` (replacing one of that name).

    Every parameter after ``res`` must be keyword-capable, annotated (int, float, str, bool,
    ``list[...]`` of those, or ``Literal[...]``) and have a default; ``params`` gives their help
    text and bounds (``ParamDoc``, or a help string). ``roles`` are the model roles it uses
    (``("memory",)``: the memory LLM, ``res.memory_llm``); ``roles_of(params)`` names roles that
    depend on the parameters (a composite memory's parts). ``preflight(params, resource)`` runs
    before a run starts and raises ``ValueError`` (one line) when the memory could not be built:
    parameters that contradict each other, a server that is missing or unreachable. ``stack``
    names modules the memory imports on first use (e.g. ``chroma.STACK``); ``prepare_memories``
    imports them in the main thread before cells run in threads. ``persistent`` declares where
    the memory keeps its state: ``{parameter: (values, ...)}``, e.g. ``{"saver": ("postgres",)}``,
    names the parameter values with which it keeps it on a server (the ``postgres`` resource),
    so ``memory-lab serve`` gives each user a fixed cell id there and finds their memory again
    after a restart (``MemoryFactory.keeps_state``); a memory declaring none lives in the process.
    ``system`` is the field system the memory runs (its ``SYSTEM`` declaration: what it needs,
    checked before a run; its telemetry switches, set now); ``rules`` (``module:Class``, by
    default the system's) is the offline memory model's rule script for the memory's prompts.

    Defined in an importable module, the memory can also be named as ``module:factory`` in a
    spec, which makes it available in ``--jobs`` and Ray workers and on ``--resume``.
    """

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        factory = declare_factory(
            name,
            fn,
            description,
            params,
            roles,
            _source_of(fn),
            roles_of,
            preflight,
            stack,
            persistent,
            system,
            rules,
            hand_rules=_hand_rules,
        )
        if system is not None and system.telemetry:
            telemetry.switch_off(system.telemetry)  # an installed system's opt-outs, from now
        # a built-in registers as its module is imported; another memory after the built-ins,
        # so it may replace one of them
        add_factory(factory, is_builtin_module(getattr(fn, "__module__", "")))
        fn.memory_name = name  # type: ignore[attr-defined]
        return fn

    return decorator
