"""A cell's clock: wall time, plus what the cached work it was served would have cost it.

The bundled embedding engines keep their vectors in a cache that the run's cells share (in the
process, and on disk for ``--jobs`` workers and reruns): whichever cell embeds a text first pays
for it, and a later cell gets it for nothing. Timed by the wall clock alone, a memory's seconds
then depended on which memory ran before it (on BEAM conversation 1, ``vector`` 192 s when it ran
first, ``hybrid`` 1.7 s for the same embeddings after it).

So a cached vector keeps the seconds it cost to compute (``OfflineEmbeddings``), and a cell
that is served it from the cache is charged those seconds, once per text and model in the cell
(as if it had computed it itself, and kept it): ``clock`` is ``time.perf_counter()`` plus what
the cell was charged so far, and the cell times its turns and recalls with it. The charge is
kept per thread, between ``cell_scope``'s entry and exit (a cell runs in one thread); outside a
scope nothing is charged. A vector cached before costs were recorded is charged nothing.

Loading a library or a model on first use (``loading``: Kiwi's Korean model, scikit-learn's
stop words) is the process's start-up, like the engines ``RunModels.warm`` loads before the
first cell: whichever cell (or the offline reader) first needs it would pay it, so its seconds
are taken off the clock of the cell that happens to load it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager


class _Scope(threading.local):
    def __init__(self) -> None:
        self.charged = 0.0
        self.seen: set[str] | None = None  # the (model, text) keys this cell has had


_SCOPE = _Scope()


@contextmanager
def cell_scope() -> Iterator[None]:
    """Charge cached work to the cell running in this thread until the block ends."""
    outer = (_SCOPE.charged, _SCOPE.seen)
    _SCOPE.charged, _SCOPE.seen = 0.0, set()
    try:
        yield
    finally:
        _SCOPE.charged, _SCOPE.seen = outer


def clock() -> float:
    """Seconds, as ``time.perf_counter()``, plus the cached work this thread's cell was charged."""
    return time.perf_counter() + _SCOPE.charged


@contextmanager
def loading() -> Iterator[None]:
    """A one-time load inside the block: its seconds are in no cell's clock."""
    started = time.perf_counter()
    try:
        yield
    finally:
        if _SCOPE.seen is not None:
            _SCOPE.charged -= time.perf_counter() - started


def charged() -> float:
    """The seconds of cached work charged to this thread's cell so far (0 outside a cell)."""
    return _SCOPE.charged


def served(keys: Iterable[str], computed: Iterable[str], costs: Mapping[str, float]) -> None:
    """A cell was served the vectors of ``keys``: those it had not had before and that were not
    ``computed`` now (taken from the cache) are charged their recorded cost."""
    seen = _SCOPE.seen
    if seen is None:
        return
    seen.update(computed)
    for key in keys:
        if key not in seen:
            seen.add(key)
            _SCOPE.charged += costs.get(key, 0.0)
