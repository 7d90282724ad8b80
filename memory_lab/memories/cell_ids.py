"""Ids a library draws with ``uuid4``, drawn from the cell's counter instead, so reruns repeat.

A library module that does ``import uuid`` gets a ``CellIds`` in place of the module
(``library_module.uuid = CellIds(draw)``): while a cell's work runs, ``draw`` (a context
variable, so cells in threads keep apart) holds the cell's counter and ``uuid4`` comes from it;
outside a cell it is random, as the library meant. Everything else is the ``uuid`` module's.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Callable
from typing import Any

Draw = contextvars.ContextVar[Callable[[], uuid.UUID] | None]


class CellIds:
    """The ``uuid`` module, with ``uuid4`` drawn from ``draw`` while it holds a counter."""

    def __init__(self, draw: Draw) -> None:
        self._draw = draw

    def __getattr__(self, name: str) -> Any:
        return getattr(uuid, name)

    def uuid4(self) -> uuid.UUID:
        draw = self._draw.get()
        return draw() if draw is not None else uuid.uuid4()
