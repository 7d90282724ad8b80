"""The typed-JSON kit run.json is made of: a section as a frozen dataclass (``JsonRecord``) whose
fields are read from its JSON object, each checked against its annotation or converted
(``CONVERT``: the ``as_...`` converters below), written back as they were read.

A key the file lacked stays unwritten (``absent``), keys this version does not know are kept
(``extra``), a field marked ``UNWRITTEN`` is never written, and a value that cannot be used is a
``RunSpecError`` naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar

from memory_lab.errors import ConfigError
from memory_lab.log.config import RunConfig
from memory_lab.log.records import field_checks
from memory_lab.memories.specs import MemorySpec
from memory_lab.models.accounting import Price, price_dict
from memory_lab.models.spec import ModelSpec

UNWRITTEN = {"written": False}  # a field's metadata: never written


class RunSpecError(ConfigError):
    """A run.json field that cannot be used, named with its file."""


@dataclass(frozen=True)
class JsonRecord:
    """A section of run.json: known keys as typed fields, the keys it lacked (``absent``, never
    written back) and keys this version does not know (``extra``, written back as they were)."""

    CONVERT: ClassVar[dict[str, Any]] = {}  # field -> its value from run.json's
    KEYS: ClassVar[dict[str, str]] = {}  # field -> its run.json key, where they differ

    absent: frozenset[str] = field(default=frozenset(), kw_only=True, repr=False)
    extra: dict[str, Any] = field(default_factory=dict, kw_only=True, repr=False)

    @classmethod
    def _keys(cls) -> dict[str, str]:
        """field -> run.json key, for every field that is written."""
        return {
            f.name: cls.KEYS.get(f.name, f.name)
            for f in dataclasses.fields(cls)
            if f.name not in ("absent", "extra") and f.metadata.get("written", True)
        }

    @classmethod
    def from_json(cls, data: Any, where: str, section: str) -> Any:
        if not isinstance(data, dict):
            what = f"field {section!r}" if section else "it"
            raise RunSpecError(f"{where}: {what} must be an object, got {type(data).__name__}")
        keys = cls._keys()
        values = {}
        for name, key in keys.items():
            if key in data:
                convert = cls.CONVERT.get(name) or _checked(*field_checks(cls)[name])
                label = f"{section}.{key}" if section else key
                try:
                    values[name] = convert(data[key], where, label)
                except RunSpecError:
                    raise
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    if str(exc).startswith(f"{where}: "):  # it names the file already
                        raise RunSpecError(str(exc)) from None
                    raise RunSpecError(f"{where}: field {label!r}: {exc}") from None
        absent = frozenset(n for n, k in keys.items() if k not in data)
        extra = {k: v for k, v in data.items() if k not in keys.values()}
        derived = {f.name for f in dataclasses.fields(cls) if not f.init}  # checked, not kept
        values = {n: v for n, v in values.items() if n not in derived}
        for f in dataclasses.fields(cls):
            required = f.default is MISSING and f.default_factory is MISSING and f.init
            if required and f.name not in values:
                raise RunSpecError(f"{where}: field {section!r} lacks the field {keys[f.name]!r}")
        try:
            return cls(**values, absent=absent, extra=extra)
        except TypeError as exc:  # a required key is missing
            raise RunSpecError(f"{where}: field {section!r}: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        keys = self._keys()
        out = {k: _plain(getattr(self, n)) for n, k in keys.items() if n not in self.absent}
        out.update(self.extra)
        return out


def _plain(value: Any) -> Any:
    """A field as run.json holds it."""
    if isinstance(value, ModelSpec):
        return str(value)
    if isinstance(value, Price):
        return price_dict(value)
    if isinstance(value, JsonRecord | RunConfig | MemorySpec):
        return _plain(value.to_json()) if not isinstance(value, JsonRecord) else value.to_json()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _checked(check: Any, annotation: str) -> Any:
    """A converter taking a value as it is when it is of its field's type (``accepts``)."""

    def convert(value: Any, where: str, label: str) -> Any:
        if not check(value):
            raise ValueError(f"must be {annotation}, got {json.dumps(value)[:40]}")
        return value

    return convert


def as_model(text: Any, where: str, label: str) -> ModelSpec:
    return ModelSpec.parse(text)


def as_section(kind: Any) -> Any:
    """A converter reading a nested section as ``kind``."""
    return lambda data, where, label: kind.from_json(data, where, label)


def as_price(data: Any, where: str, label: str) -> Price:
    if not isinstance(data, dict):
        raise ValueError(f"must be an object, got {type(data).__name__}")
    return Price(**data)


def as_records(kind: Any) -> Any:
    def convert(items: Any, where: str, label: str) -> tuple:
        if not isinstance(items, list):
            raise ValueError(f"must be a list, got {type(items).__name__}")
        return tuple(kind.from_json(x, where, f"{label}[{n}]") for n, x in enumerate(items))

    return convert


def as_strings(items: Any, where: str, label: str) -> tuple[str, ...]:
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise ValueError("must be a list of strings")
    return tuple(items)


def as_list(items: Any, where: str, label: str) -> tuple:
    if not isinstance(items, list):
        raise ValueError(f"must be a list, got {type(items).__name__}")
    return tuple(items)
