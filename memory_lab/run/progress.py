"""The run's progress bar: tokens replayed (exchanges and the probes after them), with an ETA
from the rate measured since the first exchange, ticking every second.

Counted in tokens, not exchanges: an imported exchange may hold a thousand tokens where a built-in
one holds twenty, so a bar of exchanges told little. Each exchange weighs the tokens of its user and
assistant text and of the questions of the probes asked after it (``exchange_weights``), and
advances the bar when its probes have been asked. Every executor that can reports each exchange
as it ends (in the process, and from ``--jobs`` workers over their pipe); ``--concurrency``
threads and Ray report whole cells. Until the first exchange ends the bar says the run is
starting (models load first, in every worker). From then on the ETA is the work left at the
average rate since the first exchange ended, recomputed each second: while a long probe holds
the bar still the ETA grows, rather than standing at the figure it had before.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm

from memory_lab.dialogue.model import Dialogue
from memory_lab.models.tokens import count_tokens
from memory_lab.run.exchanges import exchanges

STARTING = "starting: loading models"
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} {unit} [{elapsed}{postfix}]"


def exchange_weights(dialogue: Dialogue) -> list[int]:
    """Each exchange's weight on the bar: the tokens of its user and assistant text and of the
    questions of the probes asked after it (at least 1)."""
    exs = exchanges(dialogue)
    where = {tid: ex.index for ex in exs for tid in ex.turn_ids}
    weights = [count_tokens(ex.user) + count_tokens(ex.assistant) for ex in exs]
    for probe in dialogue.probes:
        if probe.after in where:
            weights[where[probe.after]] += count_tokens(probe.question)
    return [max(1, w) for w in weights]


def clock_text(seconds: float) -> str:
    """``mm:ss``, or ``h:mm:ss`` from an hour."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class RunProgress:
    """The bar of one run over ``cells`` (index -> dialogue): ``exchange(index)`` when a cell's
    exchange ends, ``cell_done(index)`` when the cell ends (the rest of its weight, for an
    executor that reports whole cells or a cell that failed), ``close()`` at the end."""

    def __init__(
        self, cells: Iterable[tuple[int, Dialogue]], description: str, enabled: bool
    ) -> None:
        by_dialogue: dict[str, list[int]] = {}
        self.weights: dict[int, list[int]] = {}
        for index, dialogue in cells:
            key = dialogue.content_hash
            if key not in by_dialogue:
                by_dialogue[key] = exchange_weights(dialogue)
            self.weights[index] = by_dialogue[key]
        self.seen = dict.fromkeys(self.weights, 0)
        self.enabled = enabled
        total = sum(sum(w) for w in self.weights.values())
        self.bar = tqdm(
            total=total,
            unit="tokens",
            unit_scale=total >= 100_000,  # 1.23M/2.60M; small counts as they are
            disable=not enabled,
            dynamic_ncols=True,
            bar_format=BAR_FORMAT,
            smoothing=0,
            file=sys.stderr,
        )
        self.bar.set_description(description)
        self._lock = threading.Lock()
        self._first: tuple[float, float] | None = None  # (when, bar's count) at the first exchange
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def start(self) -> None:
        """Say the run is starting, and tick each second until ``close``."""
        if not self.enabled:
            return
        self.bar.set_postfix_str(STARTING, refresh=True)
        self._ticker = threading.Thread(target=self._tick, name="memory-lab-progress", daemon=True)
        self._ticker.start()

    def _advance(self, amount: int) -> None:
        with self._lock:
            self.bar.n += amount  # the postfix first, then one refresh with both
            if self._first is None:  # the rate is measured from here
                self._first = (time.monotonic(), float(self.bar.n))
            self.bar.set_postfix_str(self.eta_text(), refresh=False)
            self.bar.refresh()  # every exchange shows (a few hundred bytes on stderr)

    def exchange(self, index: int) -> None:
        """Cell ``index`` ended an exchange (its probes asked)."""
        weights, n = self.weights[index], self.seen[index]
        if n < len(weights):
            self.seen[index] = n + 1
            self._advance(weights[n])

    def cell_done(self, index: int) -> None:
        """Cell ``index`` ended: whatever of its weight was not reported exchange by exchange."""
        weights, n = self.weights[index], self.seen[index]
        self.seen[index] = len(weights)
        self._advance(sum(weights[n:]))

    def eta_text(self) -> str:
        """``, ETA mm:ss`` at the average rate since the first exchange (``, ETA ?`` before
        there is a rate to go by)."""
        if self._first is None:
            return STARTING
        when, at = self._first
        done, total = self.bar.n - at, self.bar.total
        spent = time.monotonic() - when
        if done <= 0 or spent <= 0:
            return "ETA ?"
        return f"ETA {clock_text((total - self.bar.n) * spent / done)}"

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                self.bar.set_postfix_str(self.eta_text(), refresh=True)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(2)
        with self._lock:
            self.bar.set_postfix_str("", refresh=False)
            self.bar.close()

    def write(self, text: str) -> None:
        """A line above the bar."""
        tqdm.write(text, file=sys.stderr)

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
