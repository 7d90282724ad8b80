"""A run's provider limits (``run --rpm N --tpm N``): one bucket that every thread, process and
Ray task of the run shares.

**The bucket.** Each limit is a GCRA bucket (a token bucket written as the time it is next
empty, ``tat``), one per provider and kind (``openai:rpm``, ``openai:tpm``). A request reserves
its slot before it is sent: it may start at ``max(now, tat of each of its keys)``, and each key's
``tat`` moves on to ``max(tat, start) + cost / rate``; the caller sleeps until then, outside any
lock. Requests are so spaced evenly (60/N s apart under ``--rpm N``, no burst: a provider that
quantises its minute into seconds sees the same rate) and served in the order they asked. A
request costs 1 of the rpm bucket and its estimated tokens of the tpm bucket (``throttle.py``);
``settle`` gives back (or charges) the difference once the provider's usage is in. A 429
``pause``\\ s the provider's keys for its ``Retry-After`` (``retry_after``), so every thread and
process waits, not only the call that got it, and is counted.

**Where the state lives.** ``FileBucket``: a small JSON file in the run folder
(``RATE_FILE``), read and written under ``fcntl.flock``: the driver's threads
(``--concurrency``), worker processes (``--jobs``) and a local Ray's tasks on this machine all
open the same file. ``RayBucket``: with ``--executor ray``, a named Ray actor (``actor_name``)
holding the same state, which the Ray executor starts once Ray is up and every task finds by
name: tasks may run on other nodes, which share no run folder (for the same reason the Ray
executor sends records back instead of writing them), and an actor call (about a millisecond)
is nothing beside an API call. The actor computes every delay on its own clock, so nodes' clocks
need not agree. A process that cannot reach the actor (the driver before Ray starts) uses the
file.

LangChain's ``InMemoryRateLimiter`` (``langchain_core.rate_limiters``) is one process's, polls,
and counts requests only (no tokens); the openai SDK retries a 429 itself (``max_retries``,
``ClientSettings``) honouring ``retry-after-ms``/``Retry-After`` up to 120 s, but each call on
its own: neither keeps a run of many processes under a provider's limit.
"""

from __future__ import annotations

import email.utils
import fcntl
import json
import math
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_lab.errors import ConfigError

RATE_FILE = ".rate-limits.json"  # in the run folder
ANY = "*"  # the provider key of a plain ``--rpm N``: every provider, each on its own bucket
KINDS = ("rpm", "tpm")
DEFAULT_PAUSE = 1.0  # seconds a 429 without a usable Retry-After pauses the provider
MAX_PAUSE = 600.0  # a longer Retry-After pauses this long (the client gives up before)
COUNTS = ("requests", "waited_seconds", "responses_429", "paused_seconds")

Rate = float | int
RateSetting = Rate | dict[str, Rate] | None  # RunConfig.rpm/tpm: N, or provider -> N


# -- the setting ----------------------------------------------------------------------------


def _number(text: str, option: str, given: str) -> Rate:
    try:
        value: Rate = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
    if not (0 < value < math.inf):
        raise ConfigError(
            f"{option} must be a positive number per minute (N, or PROVIDER=N), got {given!r}"
        )
    return value


def parse_rates(items: list[str] | None, option: str) -> RateSetting:
    """``--rpm``/``--tpm`` as given (repeatable): ``N`` for every provider, ``PROVIDER=N`` for
    one; a number, a dict (``ANY`` for a plain N beside named ones) or None. ConfigError naming
    the option for 0, a negative number, ``abc``..."""
    if not items:
        return None
    out: dict[str, Rate] = {}
    for item in items:
        name, eq, value = str(item).rpartition("=")
        name = name.strip() if eq else ANY
        if not name:
            raise ConfigError(f"{option} expects N or PROVIDER=N, got {item!r}")
        out[name] = _number(value.strip(), option, str(item))
    return out[ANY] if list(out) == [ANY] else out


def check_rates(value: Any, option: str, providers: tuple[str, ...]) -> RateSetting:
    """A RunConfig's ``rpm``/``tpm`` checked (as run.json or a caller gives it)."""
    if value is None:
        return None
    pairs = value.items() if isinstance(value, dict) else [(ANY, value)]
    for name, rate in pairs:
        if name != ANY and name not in providers:
            raise ConfigError(
                f"{option}: unknown provider {name!r} (known: {', '.join(providers)})"
            )
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate < math.inf:
            raise ConfigError(f"{option} must be a positive number per minute, got {rate!r}")
    return dict(value) if isinstance(value, dict) else value


def describe_rates(value: RateSetting, unit: str) -> str:
    """``600 rpm`` or ``openai 600 rpm, anthropic 50 rpm`` (``ANY``: every provider)."""

    def number(v: Rate) -> str:
        return f"{int(v):,}" if float(v).is_integer() else f"{v:g}"

    if value is None:
        return ""
    if not isinstance(value, dict):
        return f"{number(value)} {unit}"
    return ", ".join(f"{'others' if k == ANY else k} {number(v)} {unit}" for k, v in value.items())


@dataclass(frozen=True)
class RateLimits:
    """The limits provider clients of a run keep (``ClientSettings.limits``): per minute, by
    provider (``ANY``: every provider), and where their shared bucket lives: ``file`` (a path)
    and, with Ray, ``actor`` (a named actor's name; the file serves when it cannot be found)."""

    rpm: tuple[tuple[str, float], ...] = ()
    tpm: tuple[tuple[str, float], ...] = ()
    file: str | None = None
    actor: str | None = None

    @classmethod
    def of(
        cls, rpm: RateSetting, tpm: RateSetting, file: str, actor: str | None = None
    ) -> RateLimits | None:
        """The limits of a run's ``rpm``/``tpm`` settings; None when it sets neither."""
        if rpm is None and tpm is None:
            return None

        def pairs(value: RateSetting) -> tuple[tuple[str, float], ...]:
            items = value.items() if isinstance(value, dict) else [(ANY, value)]
            return tuple((k, float(v)) for k, v in items if v is not None)

        return cls(pairs(rpm), pairs(tpm), file, actor)

    def rate(self, kind: str, provider: str) -> float | None:
        """Per minute, the ``kind`` (``rpm``/``tpm``) limit of ``provider``; None: no limit."""
        found = dict(getattr(self, kind))
        return found.get(provider, found.get(ANY))


def retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds a 429's headers ask to wait: ``retry-after-ms``, else ``Retry-After`` in seconds
    or as an HTTP-date; None when neither is there or usable."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            if name == "retry-after-ms":
                continue
            parsed = email.utils.parsedate_tz(value)
            if parsed is None:
                continue
            seconds = email.utils.mktime_tz(parsed) - (time.time() if now is None else now)
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


# -- the bucket's state and its operations (the same in the file and in the actor) ----------


class BucketState:
    """A bucket's state as a JSON-able dict (``tat`` per key, ``counts``) and the operations on
    it; ``now`` is the caller's clock (the file's processes share one; the actor has its own)."""

    def __init__(self, data: dict[str, Any] | None = None):
        data = data if isinstance(data, dict) else {}
        self.tat: dict[str, float] = dict(data.get("tat") or {})
        counts = data.get("counts") or {}
        self.counts: dict[str, float] = {k: counts.get(k, 0) for k in COUNTS}

    def data(self) -> dict[str, Any]:
        return {"tat": self.tat, "counts": self.counts}

    def reserve(self, costs: list[tuple[str, float, float]], now: float) -> float:
        """Seconds from ``now`` until a request of ``costs`` ((key, rate per second, cost)...)
        may be sent; the slot is its own from here on."""
        start = max([now, *(self.tat.get(key, now) for key, _, _ in costs)])
        for key, rate, cost in costs:
            self.tat[key] = max(self.tat.get(key, now), start) + cost / rate
        self.counts["requests"] += 1
        self.counts["waited_seconds"] += start - now
        return start - now

    def settle(self, key: str, rate: float, tokens: float) -> None:
        """Give back ``tokens`` reserved but not used (negative: charge what was used beyond)."""
        if key in self.tat:
            self.tat[key] -= tokens / rate

    def pause(self, keys: list[str], seconds: float, now: float) -> None:
        """No request of ``keys`` before ``seconds`` from now (a 429's Retry-After), counted."""
        seconds = min(max(seconds, 0.0), MAX_PAUSE)
        for key in keys:
            self.tat[key] = max(self.tat.get(key, now), now + seconds)
        self.counts["responses_429"] += 1
        self.counts["paused_seconds"] += seconds

    def add(self, counts: dict[str, float]) -> None:
        for key in COUNTS:
            self.counts[key] += counts.get(key, 0)


class FileBucket:
    """The bucket in a file, changed under ``fcntl.flock`` (each operation opens, locks, reads,
    writes and closes it: threads and processes of this machine exclude each other alike)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @contextmanager
    def _state(self):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 1 << 20, 0)
            try:
                state = BucketState(json.loads(raw) if raw.strip() else None)
            except ValueError:  # cut short by a crash mid-write: start afresh
                state = BucketState()
            yield state
            text = json.dumps(state.data()).encode()
            os.pwrite(fd, text, 0)
            os.ftruncate(fd, len(text))
        finally:
            os.close(fd)  # releases the lock

    def reserve(self, costs: list[tuple[str, float, float]]) -> float:
        with self._state() as state:
            return state.reserve(costs, time.time())

    def settle(self, key: str, rate: float, tokens: float) -> None:
        with self._state() as state:
            state.settle(key, rate, tokens)

    def pause(self, keys: list[str], seconds: float) -> None:
        with self._state() as state:
            state.pause(keys, seconds, time.time())

    def add(self, counts: dict[str, float]) -> None:
        with self._state() as state:
            state.add(counts)

    def stats(self) -> dict[str, float]:
        with self._state() as state:
            return dict(state.counts)

    def reset(self) -> None:
        """Counts from zero (a run's execution begins); a pause still running is kept."""
        with self._state() as state:
            state.counts = dict.fromkeys(COUNTS, 0)


class BucketActor:
    """The bucket held by a Ray actor (``RayBucket``); delays on the actor's clock."""

    def __init__(self) -> None:
        self.state = BucketState()

    def reserve(self, costs: list[tuple[str, float, float]]) -> float:
        return self.state.reserve(costs, time.monotonic())

    def settle(self, key: str, rate: float, tokens: float) -> None:
        self.state.settle(key, rate, tokens)

    def pause(self, keys: list[str], seconds: float) -> None:
        self.state.pause(keys, seconds, time.monotonic())

    def stats(self) -> dict[str, float]:
        return dict(self.state.counts)


class RayBucket:
    """The named actor's bucket, called from any task of the run (one round trip a call)."""

    def __init__(self, handle: Any):
        self.handle = handle

    def _call(self, name: str, *args: Any) -> Any:
        import ray

        return ray.get(getattr(self.handle, name).remote(*args))

    def reserve(self, costs: list[tuple[str, float, float]]) -> float:
        return self._call("reserve", costs)

    def settle(self, key: str, rate: float, tokens: float) -> None:
        self._call("settle", key, rate, tokens)

    def pause(self, keys: list[str], seconds: float) -> None:
        self._call("pause", keys, seconds)

    def stats(self) -> dict[str, float]:
        return self._call("stats")


def actor_name(run_id: str | None) -> str:
    """The name of a run's bucket actor (``--executor ray``)."""
    return f"memory-lab-rate-limits-{run_id or 'run'}"


def _ray_actor(name: str) -> Any:
    """The named actor, when this process is connected to Ray and it exists; else None."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        return ray.get_actor(name)
    except ValueError:
        return None


def open_bucket(limits: RateLimits) -> FileBucket | RayBucket:
    """The run's shared bucket: its Ray actor where there is one to reach, else its file."""
    if limits.actor:
        handle = _ray_actor(limits.actor)
        if handle is not None:
            return RayBucket(handle)
    if limits.file is None:
        raise ValueError("rate limits without a bucket file")
    return FileBucket(limits.file)


def start_actor(ray: Any, limits: RateLimits | None) -> Any:
    """Start the run's bucket actor on the connected Ray (no CPU of the cells'); None without
    limits or an actor to start."""
    if limits is None or not limits.actor:
        return None
    remote = ray.remote(num_cpus=0, max_restarts=0)(BucketActor)
    return remote.options(name=limits.actor, get_if_exists=True).remote()


def stop_actor(ray: Any, handle: Any, limits: RateLimits) -> None:
    """Add the actor's counts to the run's bucket file (the driver reports them from there),
    then end it."""
    try:
        counts = ray.get(handle.stats.remote(), timeout=30)
        if limits.file:
            FileBucket(limits.file).add(counts)
    finally:
        ray.kill(handle)
