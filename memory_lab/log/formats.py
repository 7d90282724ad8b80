"""The results folder's format versions, and the one migration of older files.

A reader of a results folder understands two kinds of file: ``run.json`` (``RunSpec``) and the
record streams (``records.jsonl``). Each names its format version: run.json by its
``format_version`` key, a record stream by its first line, a header record
``{"type": "format", "stream": "records", "version": N}`` (``stream_header``). A file without
one is version 1: everything written before versions were.

Every difference between an older format and this one is handled here, once: ``migrate_run``
turns an older run.json's content into this version's, ``migrate_record`` an older stream's
record; readers see this version only. A version newer than this memory-lab's is refused with
one line naming the file and the version.

Version 2 differs from version 1:

- run.json's ``config`` is grouped (``RunConfig.GROUPS``: models, protocol, run, judge, limits,
  pricing) and always says where the embeddings run (``device``); a version-1 config without
  ``context_limit`` ran without a limit (before the window default).
- run.json writes no config field twice: version 1's copies of the config beside it
  (``MIRRORS``: answer_style, mode, concurrency, dry_run, context_limit, jobs) are gone
  (``RunSpec`` derives them from ``config``); a version-1 file that recorded a limit but not its
  source gets an unknown source (``context_limit_source: null``).
- ``config_sha256`` covers version 2's fields as written. A version-1 file's checksums are
  checked first: a field edited since its run started keeps a hash that never matches
  (``EDITED``), so ``--resume`` refuses it exactly as before (an edited mirror counts as an
  edited ``config``).
- A probe graded by one prompt once recorded only ``judge_correct`` (and ``judge_raw``): it gets
  the one ``judge_verdicts`` entry that says the same.
"""

from __future__ import annotations

from typing import Any

from memory_lab.errors import ConfigError
from memory_lab.log.config import group_config
from memory_lab.log.run_guard import CHECKSUM_FIELDS, CHECKSUM_KEY, field_hash

RUN_FORMAT = 2  # run.json's version, written as FORMAT_KEY
RECORDS_FORMAT = 2  # records.jsonl's version, written in its header record
FORMAT_KEY = "format_version"
HEADER_TYPE = "format"  # the header record's type: never a record of a cell
MIRRORS = ("answer_style", "mode", "concurrency", "dry_run", "context_limit", "jobs")
EDITED = "edited before its run.json became format 2"  # a checksum that never matches


class FormatError(ConfigError):
    """A format version this memory-lab cannot read, named with its file."""


def _version(value: Any, where: str, field: str, newest: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise FormatError(f"{where}: {field} must be a whole number from 1, got {value!r}")
    if value > newest:
        raise FormatError(
            f"{where}: {field} {value} is newer than this memory-lab reads ({newest}); "
            "upgrade memory-lab to read it"
        )
    return value


def run_version(data: dict[str, Any], where: str) -> int:
    """The format version of run.json's content ``data`` (1 when it names none)."""
    return _version(data.get(FORMAT_KEY, 1), where, FORMAT_KEY, RUN_FORMAT)


def migrate_run(data: dict[str, Any], where: str) -> dict[str, Any]:
    """run.json's content ``data`` in this version's layout (``data`` itself when it is)."""
    if run_version(data, where) == RUN_FORMAT:
        return data
    out = {k: v for k, v in data.items() if k not in MIRRORS}
    if isinstance(data.get("config"), dict):
        out["config"] = group_config({"context_limit": None, "device": "cpu", **data["config"]})
    if "context_limit" in data and "context_limit_source" not in data:
        out["context_limit_source"] = None
    out[FORMAT_KEY] = RUN_FORMAT
    recorded = data.get(CHECKSUM_KEY)
    if isinstance(recorded, dict) and all(isinstance(v, str) for v in recorded.values()):
        edited = {k for k, v in recorded.items() if field_hash(data.get(k)) != v}
        if edited & set(MIRRORS):
            edited.add("config")
        out[CHECKSUM_KEY] = {
            k: EDITED if k in edited else field_hash(out.get(k)) for k in CHECKSUM_FIELDS
        }
    return out


def stream_header() -> dict[str, Any]:
    """The first record of a record stream this version writes."""
    return {"type": HEADER_TYPE, "stream": "records", "version": RECORDS_FORMAT}


def is_header(record: Any) -> bool:
    return isinstance(record, dict) and record.get("type") == HEADER_TYPE


def stream_version(header: dict[str, Any], where: str) -> int:
    """The version a stream's header record names (FormatError naming ``where`` otherwise)."""
    return _version(header.get("version"), where, "its format version", RECORDS_FORMAT)


def migrate_record(record: dict[str, Any], version: int) -> dict[str, Any]:
    """A record of a version-``version`` stream as this version writes it."""
    if version >= RECORDS_FORMAT or record.get("type") != "probe":
        return record
    if record.get("judge_verdicts") or record.get("judge_raw") is None:  # graded by none
        return record
    correct = record.get("judge_correct")
    verdict = {
        "prompt": "p1",
        "run": 0,
        "correct": correct if isinstance(correct, bool) else None,
        "raw": record.get("judge_raw"),
        "input_tokens": record.get("judge_input_tokens") or 0,
        "output_tokens": record.get("judge_output_tokens") or 0,
        "cache_hit": bool(record.get("judge_cache_hit")),
    }
    return {**record, "judge_verdicts": [verdict]}
