"""Which code a ``--resume`` may import: a memory named ``module:factory`` is code, and a
results folder can come from anyone.

A new run records, beside such a memory's source, the file its module was imported from and
the file's SHA-256 (``pin``). A resume imports a memory's source only when it is memory-lab's
own (``memory_lab.*``), an installed entry point of the ``memory_lab.memories`` group, or the
recorded file unchanged: the module is located without importing anything (``locate``: no
package's ``__init__`` runs) and must resolve to that file with that hash. Anything else (a
``run.json`` naming another module, a file changed since, a run.json without the pin) is
refused naming the memory, and ``--trust-sources`` imports it anyway.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from memory_lab.errors import BadInput

OWN_PACKAGE = "memory_lab"
ENTRY_POINT_GROUP = "memory_lab.memories"
TRUST_OPTION = "--trust-sources"


class UntrustedSource(BadInput):
    """A recorded memory source that a resume will not import without ``--trust-sources``."""


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _own(module: str) -> bool:
    return module == OWN_PACKAGE or module.startswith(OWN_PACKAGE + ".")


def pin(source: str | None) -> tuple[str | None, str | None]:
    """(file, SHA-256) of the module ``source`` (``module:attr``) was imported from, for
    run.json; (None, None) for memory-lab's own memories and a source without a file."""
    if not source:
        return None, None
    module = sys.modules.get(source.partition(":")[0])
    if _own(source.partition(":")[0]) or module is None:
        return None, None
    file = getattr(module, "__file__", None)
    if not file or not Path(file).is_file():
        return None, None
    return str(Path(file).resolve()), _sha256(file)


def locate(module: str) -> str | None:
    """The file ``module`` would be imported from, found without importing anything (each
    package of a dotted name looked up on the path, its ``__init__`` not run); None when not
    found or not a file."""
    path = None
    spec = None
    for n, part in enumerate(module.split(".")):
        spec = importlib.machinery.PathFinder.find_spec(part, path)
        if spec is None:
            return None
        if n < module.count("."):
            path = spec.submodule_search_locations
            if not path:
                return None
    origin = spec.origin if spec is not None else None
    return origin if origin and Path(origin).is_file() else None


def check_source(data: dict[str, Any], where: str, trust: bool = False) -> None:
    """UntrustedSource naming the memory of ``data`` (a run.json memory spec) when a resume may
    not import its recorded source (see the module's docstring); nothing for a memory without
    one, memory-lab's own, an installed entry point, the recorded file unchanged, or ``trust``."""
    source = data.get("source")
    if not source or trust:
        return
    module = str(source).partition(":")[0]
    if _own(module):
        return
    if any(ep.value == source for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)):
        return
    label = data.get("label") or data.get("name")
    refused = f"{where}: memory {label!r} is code from {source!r}"
    file, sha = data.get("source_file"), data.get("source_sha256")
    if not isinstance(file, str) or not isinstance(sha, str):
        raise UntrustedSource(
            f"{refused}, and run.json does not record the file and SHA-256 it ran from; a "
            f"resume imports only memory-lab's memories, installed entry points or the recorded "
            f"file unchanged ({TRUST_OPTION} imports it anyway)"
        )
    found = locate(module)
    if found is None or Path(found).resolve() != Path(file).resolve():
        raise UntrustedSource(
            f"{refused}: it now resolves to {found or 'nothing'}, not the recorded {file} "
            f"({TRUST_OPTION} imports it anyway)"
        )
    if _sha256(found) != sha:
        raise UntrustedSource(
            f"{refused}: {file} changed since the run started ({TRUST_OPTION} imports it anyway)"
        )
