"""The guard's rate limiter on its own: a sliding window per user, idle users forgotten."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from memory_lab.serve.guard import RateLimiter, RequestError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limit_is_a_sliding_window_per_user():
    clock = Clock()
    limiter = RateLimiter(3, 10.0, clock=clock)
    for _ in range(3):
        limiter.check("ann")
    with pytest.raises(RequestError) as refused:
        limiter.check("ann")
    assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "10"
    limiter.check("ben")  # another user is not limited
    clock.now += 10.0  # the first three left the window
    limiter.check("ann")


def test_users_idle_for_a_window_are_forgotten_as_others_come():
    clock = Clock()
    limiter = RateLimiter(5, 10.0, clock=clock)
    for n in range(500):
        limiter.check(f"u{n}")
        clock.now += 0.01  # u0 .. u499 over 5 seconds
    limiter.check("u3")  # seen again: not idle
    clock.now += 9.005  # u0 .. u400 (but u3) now idle for a whole window
    limiter.check("new")
    assert set(limiter._seen) == {"u3", "new"} | {f"u{n}" for n in range(401, 500)}
    clock.now += 100.0
    limiter.check("last")
    assert list(limiter._seen) == ["last"]


class CountingDict(OrderedDict):
    """An OrderedDict that counts the entries any walk over it yields."""

    walked = 0

    def _count(self, entries):
        for entry in entries:
            CountingDict.walked += 1
            yield entry

    def __iter__(self):
        return self._count(super().__iter__())

    def items(self):
        return self._count(super().items())

    def values(self):
        return self._count(super().values())


def test_a_check_does_not_scan_every_user():
    """20,000 users active within the window: a check looks at a few of them, not all."""
    clock = Clock()
    limiter = RateLimiter(5, 3600.0, clock=clock)
    limiter._seen = CountingDict()
    for n in range(20_000):
        limiter.check(f"user{n}")
        clock.now += 0.001
    CountingDict.walked = 0
    for n in range(2_000):
        limiter.check(f"user{n}")
    assert CountingDict.walked <= 2 * 2_000  # a scan of them all: 20,000 a check
