"""A small thread pool that yields its results in order (a cell's probes are answered in it)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any


def in_threads(job: Callable[[int, int], Any], count: int, width: int) -> Iterator[Any]:
    """``job(thread, i)`` for each i in ``range(count)`` on ``width`` daemon threads.

    Yields the results in order of i, each once it and those before it are done; an error is
    raised in its turn. Daemon threads: a provider call that hangs cannot hold up a stopping run.
    """
    results: dict[int, tuple[bool, Any]] = {}
    done = threading.Condition()
    claimed = iter(range(count))

    def work(thread: int) -> None:
        while True:
            with done:
                i = next(claimed, None)
            if i is None:
                return
            try:
                outcome = (True, job(thread, i))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, in order
                outcome = (False, exc)
            with done:
                results[i] = outcome
                done.notify_all()

    for thread in range(width):
        name = f"memory-lab-probe-{thread}"
        threading.Thread(target=work, args=(thread,), name=name, daemon=True).start()
    for i in range(count):
        with done:
            while i not in results:
                done.wait(0.5)
            ok, value = results.pop(i)
        if not ok:
            raise value
        yield value
