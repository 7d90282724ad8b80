"""Rule scripts of the offline memory model for the memory systems it recognises.

A memory calls its model as it would any provider's; the offline memory model looks at what it
is asked (the tools bound, the prompt) and, when it recognises a memory system's request,
answers with that system's script. The scripts are not listed here: each memory that needs one
declares it (``register_memory(..., rules=)``; a field system in its ``SYSTEM`` declaration,
its script in its own package, ``memories/systems/<name>/rules.py``); the memory registry
passes each on (``declare``) as the memory registers, and ``recognised`` asks the declared
scripts, in the order their memories registered. Here: ``RuleScript`` (``base``),
their shared shape; ``facts``, what they count as a fact about the user; ``memgpt``, the
built-in MemGPT memory's script.
"""

from __future__ import annotations

from importlib import import_module

from memory_lab.models.offline_rules.base import (
    DONE_REPLY,
    Request,
    RuleScript,
    RuleSettings,
    numbered,
)

__all__ = [
    "DONE_REPLY",
    "Request",
    "RuleScript",
    "RuleSettings",
    "declare",
    "declared",
    "numbered",
    "recognised",
]


_DECLARED: dict[str, RuleScript | None] = {}  # ``module:Class`` -> its script, made on first use


def declare(source: str) -> None:
    """A registered memory's rule script (``module:Class`` or ``module:instance``), recognised
    from now on (each once, in the order declared; imported when first asked)."""
    _DECLARED.setdefault(source, None)


def declared() -> list[RuleScript]:
    """The declared scripts, each imported and made once."""
    for source, script in _DECLARED.items():
        if script is None:
            module, _, attr = source.partition(":")
            found = getattr(import_module(module), attr)
            _DECLARED[source] = found() if isinstance(found, type) else found
    return [s for s in _DECLARED.values() if s is not None]


def recognised(request: Request) -> RuleScript | None:
    """The script of the registered memory system making ``request``, or None."""
    return next((script for script in declared() if script.recognises(request)), None)
