"""A memory factory's parameters: declared by its signature (type and default) and ``ParamDoc``
(help text, bounds, a further check), converted from a spec's text or run.json's values and
checked, each refusal a ``MemorySpecError`` naming the memory and the parameter.

Parameters are annotated ``int``, ``float``, ``str``, ``bool``, ``list[...]`` of those (joined
with ``+`` in a spec: ``LIST_SEPARATOR``) or ``Literal[...]`` choices.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from memory_lab.errors import BadInput

LIST_SEPARATOR = "+"
INT_LIMIT = 2**31 - 1  # an int parameter without a declared max fits a C int (k, sizes, tokens)


class MemorySpecError(BadInput):
    """An unknown memory, unknown parameter or bad value in a memory spec."""


@dataclass(frozen=True)
class ParamDoc:
    """Help text and bounds for one factory parameter (type and default come from its signature).

    ``check`` validates a converted value further when a spec is parsed (e.g. that each part of
    a composite memory is itself a valid spec) and returns it; it raises MemorySpecError.
    """

    help: str = ""
    min: float | None = None
    max: float | None = None
    check: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Param:
    name: str
    type: Any  # int | float | str | bool | list[...] | Literal[...]
    default: Any
    help: str = ""
    min: float | None = None
    max: float | None = None
    validate: Callable[[Any], Any] | None = field(default=None, compare=False)

    @property
    def type_name(self) -> str:
        origin = typing.get_origin(self.type)
        if origin is Literal:
            return "|".join(str(c) for c in typing.get_args(self.type))
        if origin is list:
            return f"list[{typing.get_args(self.type)[0].__name__}]"
        return self.type.__name__

    def check(self, value: Any, memory: str) -> Any:
        """``value`` converted and checked; MemorySpecError naming the memory otherwise."""
        value = self._convert(value, memory)
        return self.validate(value) if self.validate is not None else value

    def _convert(self, value: Any, memory: str) -> Any:
        origin = typing.get_origin(self.type)
        if origin is list:
            inner = typing.get_args(self.type)[0]
            if isinstance(value, str):
                value = [v for v in value.split(LIST_SEPARATOR) if v.strip()]
            if not isinstance(value, (list, tuple)):
                raise self._error(memory, value)
            return [self._scalar(inner, v, memory) for v in value]
        if origin is Literal:
            choices = typing.get_args(self.type)
            for choice in choices:
                if str(choice) == str(value):
                    return choice
            raise MemorySpecError(
                f"memory '{memory}': parameter '{self.name}' must be one of "
                f"{', '.join(map(str, choices))}, got {value!r}"
            )
        return self._scalar(self.type, value, memory)

    def _scalar(self, kind: type, raw: Any, memory: str) -> Any:
        try:
            if kind is bool:
                if isinstance(raw, bool):
                    value = raw
                elif str(raw).lower() in ("1", "true", "yes", "on"):
                    value = True
                elif str(raw).lower() in ("0", "false", "no", "off"):
                    value = False
                else:
                    raise ValueError(raw)
            elif kind is int and isinstance(raw, float) and not raw.is_integer():
                raise ValueError(raw)
            else:
                value = kind(str(raw).strip() if not isinstance(raw, (int, float)) else raw)
        except (TypeError, ValueError, OverflowError):
            raise self._error(memory, raw) from None
        if kind is float and not math.isfinite(value):
            raise MemorySpecError(
                f"memory '{memory}': parameter '{self.name}' must be a finite number, got {raw!r}"
            )
        if kind is int and abs(value) > INT_LIMIT and self.max is None:
            raise MemorySpecError(
                f"memory '{memory}': parameter '{self.name}' must be between {-INT_LIMIT:,} "
                f"and {INT_LIMIT:,}, got {value}"
            )
        if kind in (int, float):
            if self.min is not None and value < self.min:
                raise MemorySpecError(
                    f"memory '{memory}': parameter '{self.name}' must be at least "
                    f"{_num(self.min)}, got {value}"
                )
            if self.max is not None and value > self.max:
                raise MemorySpecError(
                    f"memory '{memory}': parameter '{self.name}' must be at most "
                    f"{_num(self.max)}, got {value}"
                )
        return value

    def _error(self, memory: str, raw: Any) -> MemorySpecError:
        return MemorySpecError(
            f"memory '{memory}': parameter '{self.name}' must be {self.type_name}, got {raw!r}"
        )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
