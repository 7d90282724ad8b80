"""Running a ``memory-lab`` command: ``main`` (exit codes, the one-line errors, Ctrl-C and
SIGTERM) and ``command``, the installed script."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from memory_lab.cli.parser import build_parser, given_run_options
from memory_lab.dialogue.model import DialogueError
from memory_lab.errors import EXIT_BUG, EXIT_INTERRUPTED, exit_code
from memory_lab.text.redact import redact, redact_logs


def main(argv: list[str] | None = None) -> int:
    """Run a command; its exit code, one of ``errors.py``'s: 0 success, 1 a cell failed
    (recorded), 2 bad input, 3 the environment lacks something, 4 a provider failed (each one
    line naming the file, field or option), 70 a bug (its traceback and a request to report
    it), 130 interrupted. ``--debug`` shows the traceback of any error."""
    args = build_parser().parse_args(argv)
    redact_logs()  # no log line carries a credential, whoever logs it
    if args.command == "run":
        args.given = given_run_options(argv)
    previous = _stop_on_sigterm()
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"memory-lab: {_interrupted(args)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        code = exit_code(exc)
        print(f"memory-lab: {redact(_message(exc, code))}", file=sys.stderr)
        return code
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _message(exc: Exception, code: int) -> str:
    """What the command prints for an error: one line (every problem of a dialogue file, one a
    line), or a bug's traceback and where to report it."""
    if code == EXIT_BUG:
        trace = "".join(traceback.format_exception(exc)).rstrip()
        return f"internal error (a bug: please report it, with this traceback)\n{trace}"
    if isinstance(exc, DialogueError) and len(exc.problems) > 1:
        return f"invalid dialogues:\n{exc}"
    return f"error: {_one_line(exc)}"


def _stop_on_sigterm() -> Any:
    """SIGTERM stops a run like Ctrl-C (workers stopped, completed cells kept, exit 130).

    Returns the handler it replaced (None off the main thread, where none can be set).
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, interrupt)


def _interrupted(args: argparse.Namespace) -> str:
    """The one line printed on Ctrl-C or SIGTERM: how to resume, when there is a run to resume."""
    if args.command != "run":
        return "interrupted"
    where = args.resume or args.out
    if where is None or not (Path(where) / "run.json").exists():
        return "interrupted before the run started"
    return (
        "interrupted; completed cells are kept; continue with: "
        f"memory-lab run --resume {shlex.quote(str(where))}"
    )


def _one_line(exc: BaseException) -> str:
    """An exception as one line, naming the file when the OS error has one, with its notes
    (e.g. that run.json could not be updated either) in parentheses."""
    notes = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
    if isinstance(exc, OSError) and exc.filename and not isinstance(exc, FileExistsError):
        return f"{exc.filename}: {exc.strerror or exc}{notes}"
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = text if "\n" not in text or isinstance(exc, ValueError) else text.splitlines()[0]
    return text + notes


def command() -> None:
    """The ``memory-lab`` command: ``main``, then exit with its code. An interrupted run (130)
    has written its records and run.json when ``main`` returns, so it exits at once: without
    waiting for threads a library started (Python joins a ``concurrent.futures`` pool's task at
    exit; a cell may be in one) and without the interpreter's teardown under threads still in
    native code (which can abort)."""
    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
