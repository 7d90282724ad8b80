"""``memory-lab view``: its options, and serving the results browser on 127.0.0.1."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time

from memory_lab.serve.command import (
    HOST,
    check_port,
    listening_socket,
    missing_serve_extra,
    run_server,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    view = sub.add_parser(
        "view", help="browse and compare results folders in a local web page on 127.0.0.1"
    )
    view.add_argument(
        "folders",
        nargs="*",
        metavar="RESULTS_DIR",
        help="results folders, or folders holding them (default: results)",
    )
    view.add_argument(
        "--port", type=int, default=8766, help="port on 127.0.0.1 (0: a free one; default 8766)"
    )
    view.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from memory_lab.serve.viewer import ViewSettings, create_view_app, find_runs
    except ImportError as exc:
        raise missing_serve_extra("view", exc) from None
    check_port(args.port)
    folders = [str(f) for f in args.folders] or ["results"]
    runs = find_runs(folders)  # a folder missing or holding no run: one line, before binding
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    sock = listening_socket(args.port)
    port = sock.getsockname()[1]
    count = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    print(
        f"memory-lab view: http://{HOST}:{port}/ ({count} under {', '.join(folders)})", flush=True
    )
    app = create_view_app(ViewSettings(folders))
    try:
        run_server(app, sock)
    finally:
        app.state.work.close()
    print("memory-lab view: stopped", file=sys.stderr, flush=True)
    _exit_when_threads_linger()
    return 0


def _exit_when_threads_linger(grace: float = 2.0) -> None:
    """Once the server has stopped, end the process even if a thread is still reading a run
    (Python would wait for it at exit): the viewer writes nothing, so there is nothing to
    finish."""
    deadline = time.monotonic() + grace
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    others = [t for t in others if not t.daemon]
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in others):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
