"""The errors memory-lab raises on purpose, below every stage so any of them may raise one, and
the one place that maps them to the command's exit codes.

Three kinds, each a one-line message for the user that names the file, field or option:

- ``BadInput`` (exit 2): a file, a field, an option or a value that cannot be used. It is also a
  ``ValueError``, so code that guards a parse with ``except ValueError`` keeps working.
- ``EnvironmentProblem`` (exit 3): the machine lacks what the run needs (a package, a binary,
  an environment such as ``.venv-hindsight``, a permission), or a library misbehaves in a way
  the run detected; the message says what to install or set.
- ``ProviderFailure`` (exit 4): a model provider (an OpenAI-compatible server, Ollama, a judge)
  could not be reached or refused the request.

Anything else that reaches the command is a bug: ``memory-lab`` prints its traceback and asks
for a report (exit 70), rather than passing it off as bad input.
"""

from __future__ import annotations

# The command's exit codes, all of them (``cli/entry.py`` returns these and no others).
EXIT_OK = 0
EXIT_CELL_FAILED = 1  # a cell failed; its error is recorded, the other cells ran
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_PROVIDER = 4
EXIT_BUG = 70  # BSD's EX_SOFTWARE: an internal error
EXIT_INTERRUPTED = 130


class MemoryLabError(Exception):
    """An error memory-lab raises on purpose; ``exit_code`` is the command's exit code."""

    exit_code = EXIT_BAD_INPUT


class BadInput(MemoryLabError, ValueError):
    """A file, field, option or value that cannot be used; the message names it."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(BadInput):
    """A setting that cannot be used, named by its option."""


class EnvironmentProblem(MemoryLabError, RuntimeError):
    """What the run needs and this machine lacks (a package, a binary, an environment, a
    permission); the message says what to install or set."""

    exit_code = EXIT_ENVIRONMENT


class ProviderFailure(MemoryLabError, RuntimeError):
    """A model provider (a chat model, embeddings or a judge) that could not be reached or
    refused the request."""

    exit_code = EXIT_PROVIDER


def exit_code(exc: BaseException) -> int:
    """The command's exit code for an exception that reached it: its kind's code; for an
    operating-system error, 2 when it names a file or was raised with a message of ours (a path
    the user gave: not found, not allowed, already a run's), 3 otherwise (the disk full, too
    many open files); ``EXIT_BUG`` for anything else."""
    if isinstance(exc, MemoryLabError):
        return exc.exit_code
    if isinstance(exc, OSError):
        ours = exc.errno is None  # raised as OSError("...") by memory-lab, not by the system
        return EXIT_BAD_INPUT if exc.filename is not None or ours else EXIT_ENVIRONMENT
    return EXIT_BUG


def is_bug(exc: BaseException) -> bool:
    """Whether an exception is a bug (shown with its traceback and a request to report it)."""
    return exit_code(exc) == EXIT_BUG
