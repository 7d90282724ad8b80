"""A crafted part under ``parts/`` (a FIFO, a link) is not adopted by a resume and is never
waited on: it is deleted like any other part that is no complete cell."""

from __future__ import annotations

import contextlib
import os
import threading

from memory_lab.log.record_log import complete_part, prepare_parts


def test_a_fifo_or_a_link_for_a_complete_part_is_dropped_without_waiting(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    fifo = complete_part(parts, 0)
    os.mkfifo(fifo)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text("", "utf-8")
    complete_part(parts, 1).symlink_to(outside)
    done: list[dict] = []
    worker = threading.Thread(
        target=lambda: done.append(prepare_parts(parts, {0: ("m", "d"), 1: ("m", "d2")})),
        daemon=True,
    )
    worker.start()
    worker.join(10)
    if worker.is_alive():  # a reader waits on the FIFO: give it an end of file, then fail
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
        raise AssertionError("prepare_parts waited on a FIFO")
    assert done == [{}]
    assert sorted(p.name for p in parts.iterdir()) == []
    assert outside.exists()  # the link is deleted, not what it points to
