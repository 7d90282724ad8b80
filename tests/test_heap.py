from __future__ import annotations

import platform

from memory_lab import heap


def test_trim_returns_freed_memory_where_the_c_library_is_glibc():
    data = [bytearray(4096) for _ in range(10_000)]
    del data
    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert heap.trim() is expected
