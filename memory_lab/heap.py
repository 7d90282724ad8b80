"""Give the heap's freed memory back to the operating system.

glibc's malloc keeps what a thread freed in that thread's arena for reuse, and a server whose
requests run on many threads (``serve``: a thread pool) holds on to memory its users no longer
use: a deleted user's memory stays in the process's resident size. ``trim`` asks glibc to return
every arena's free pages (``malloc_trim(0)``); elsewhere (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from typing import Any

_LIBC: Any = None
_LOCK = threading.Lock()


def _libc() -> Any:
    global _LIBC
    with _LOCK:
        if _LIBC is None:
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _LIBC = libc if hasattr(libc, "malloc_trim") else False
            except OSError:
                _LIBC = False
        return _LIBC


def trim() -> bool:
    """Return freed heap pages to the system; whether the C library could (glibc)."""
    libc = _libc()
    if not libc:
        return False
    libc.malloc_trim(0)
    return True
