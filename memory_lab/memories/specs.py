"""Memory specs: a registered memory's name with its parameters' values, as a run names it.

``parse_memory_spec`` reads ``name``, ``name:key=value,...`` or ``module:factory[:key=value,...]``
(checked when parsed, so ``window:k=-1`` fails before a results folder is made), ``make_spec``
builds one from values, and ``spec_from_json`` rebuilds one from run.json (the recorded
parameters, never today's defaults).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memory_lab.memories.factory import MemoryFactory
from memory_lab.memories.lookup import (
    entry_points,
    factory_for,
    import_source,
    registered,
)
from memory_lab.memories.params import LIST_SEPARATOR, MemorySpecError
from memory_lab.memories.sources import check_source, pin

_SOURCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class MemorySpec:
    """A memory name with parameter values; ``label`` is what tables and charts show."""

    name: str
    params: dict[str, Any]
    label: str
    source: str | None = None
    # the file ``source``'s module was imported from and its SHA-256, when the run started
    # (``sources.pin``): what a resume may import (``sources.check_source``)
    source_file: str | None = None
    source_sha256: str | None = None

    @property
    def factory(self) -> MemoryFactory:
        """The registered factory this spec names, looked up at most once per spec (kept on the
        spec, never pickled: a worker resolves it in its own registry)."""
        found = self.__dict__.get("_factory")
        if found is None:
            found = self.__dict__["_factory"] = factory_for(self.name, self.source)
        return found

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_factory"}

    def to_json(self) -> dict[str, Any]:
        pinned = {"source_file": self.source_file, "source_sha256": self.source_sha256}
        return {
            "label": self.label,
            "name": self.name,
            "params": self.params,
            "source": self.source,
            **({k: v for k, v in pinned.items() if v is not None}),
        }


def _split_spec(spec: str) -> tuple[str | None, str, str]:
    """(source or None, name, params text) of a spec."""
    text = spec.strip()
    parts = text.split(":")
    known = parts[0] in registered() or any(ep.name == parts[0] for ep in entry_points())
    if not known and len(parts) >= 2 and _SOURCE.match(f"{parts[0]}:{parts[1]}"):
        return f"{parts[0]}:{parts[1]}", "", ":".join(parts[2:])
    name, _, rest = text.partition(":")
    return None, name, rest


def parse_memory_spec(spec: str) -> MemorySpec:
    """Parse ``name``, ``name:key=value,key=value`` or ``module:factory[:key=value,...]``.

    List values are joined with ``+`` (``hybrid:weights=0.6+0.4``).
    """
    source, name, rest = _split_spec(spec)
    try:
        factory = import_source(source) if source else factory_for(name)
    except MemorySpecError as exc:
        raise MemorySpecError(f"{exc} (in spec {spec!r})") from None
    by_name = {p.name: p for p in factory.params}
    given: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq:
            raise MemorySpecError(f"memory spec {spec!r}: expected key=value, got {item!r}")
        if key not in by_name:
            allowed = ", ".join(by_name) or "none"
            raise MemorySpecError(
                f"memory '{factory.name}' has no parameter {key!r} (parameters: {allowed})"
            )
        if key in given:
            raise MemorySpecError(f"memory spec {spec!r}: parameter {key!r} is given twice")
        given[key] = by_name[key].check(raw.strip(), factory.name)
    return make_spec(factory, given)


def _show(value: Any) -> str:
    return LIST_SEPARATOR.join(map(str, value)) if isinstance(value, list) else str(value)


def make_spec(factory: MemoryFactory, given: dict[str, Any]) -> MemorySpec:
    """A spec of ``factory`` with the ``given`` parameters (the rest at their defaults)."""
    params = {**factory.defaults(), **given}
    label = factory.name
    if given:
        label += ":" + ",".join(f"{k}={_show(given[k])}" for k in sorted(given))
    file, sha = pin(factory.source)
    spec = MemorySpec(factory.name, params, label, factory.source, file, sha)
    return _resolved(spec, factory)


def spec_from_json(
    data: dict[str, Any], where: str = "run.json", trust_sources: bool = False
) -> MemorySpec:
    """Rebuild a spec from run.json: the recorded parameters, checked, never today's defaults;
    its source imported only when a resume may (``sources.check_source``: UntrustedSource
    naming ``where`` otherwise, unless ``trust_sources``)."""
    check_source(data, where, trust_sources)
    factory = factory_for(data["name"], data.get("source"))
    by_name = {p.name: p for p in factory.params}
    params = {}
    for key, value in data.get("params", {}).items():
        if key not in by_name:
            raise MemorySpecError(
                f"memory '{factory.name}' no longer has the recorded parameter {key!r}"
            )
        params[key] = by_name[key].check(value, factory.name)
    missing = sorted(set(by_name) - set(params))
    if missing:
        raise MemorySpecError(
            f"memory '{factory.name}' has parameters not recorded in run.json: {missing}"
        )
    file, sha = data.get("source_file"), data.get("source_sha256")
    spec = MemorySpec(factory.name, params, data["label"], factory.source, file, sha)
    return _resolved(spec, factory)


def _resolved(spec: MemorySpec, factory: MemoryFactory) -> MemorySpec:
    """``spec`` knowing the factory it was parsed against (so it is never looked up again)."""
    spec.__dict__["_factory"] = factory
    return spec
