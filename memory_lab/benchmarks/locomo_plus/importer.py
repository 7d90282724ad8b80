"""LoCoMo-Plus (``xjtuleeyf/Locomo-Plus``) -> dialogue documents, one per Cognitive sample.

Each sample of ``data/locomo_plus.json`` (``cue_dialogue``, ``trigger_query``, ``time_gap``) is
stitched into a LoCoMo conversation (``locomo10.json``) as the reference's ``data/build_conv.py``
does: the host conversation is drawn with ``random.choice`` from a ``random.Random(seed)``, one
draw per sample in file order (``host=cycle``: sample ``i`` takes conversation ``i mod n``, as
``data/unified_input.py`` does); A and B become the conversation's ``speaker_a`` and
``speaker_b``; the trigger comes a week after the last session and the cue ``time_gap`` before
the trigger (weeks 7 days, months 30, years 365; a gap it cannot read, "several months", is 0
days); the cue becomes a session of its own at that date, placed among the host's sessions by
date (a tie after the host's session). The cue turns are the probe's evidence, the trigger its
question (category ``cognitive``, no answers); the gap shows in the session dates, and the
probe's metadata keeps the gap, both dates, the host and the reference's evidence text (the cue
with speaker names, what its judge is shown; ``memory_lab.benchmarks.locomo_plus.judge``).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memory_lab.benchmarks.locomo.importer import conversation, read_samples, sample_sessions
from memory_lab.dialogue.importers.common import (
    ImportReport,
    ImportResult,
    check_record,
    import_error,
    read_json,
    slug,
)
from memory_lab.text.limits import ReadBudget

PLUS_FILE = "data/locomo_plus.json"  # in a Locomo-Plus checkout
LOCOMO_NAME = "locomo10.json"  # looked for beside locomo_plus.json unless #locomo= names it
# A probe's metadata (``BENCHMARK.probe_keys``): readers import these names rather than spell the
# keys again.
RELATION_TYPE_KEY = "relation_type"  # str: the sample's relation type, "" when it has none
TIME_GAP_KEY = "time_gap"  # str: the cue's distance before the trigger, as given
GAP_DAYS_KEY = "gap_days"  # int: that gap in days, as the reference reads it
CUE_DATE_KEY = "cue_date"  # str: the cue session's date
QUERY_DATE_KEY = "query_date"  # str: the trigger's date
JUDGE_EVIDENCE_KEY = "judge_evidence"  # str: the cue with speaker names, what the judge is shown
PROBE_KEYS = (
    RELATION_TYPE_KEY,
    TIME_GAP_KEY,
    GAP_DAYS_KEY,
    CUE_DATE_KEY,
    QUERY_DATE_KEY,
    JUDGE_EVIDENCE_KEY,
)
DEFAULT_SEED = 0
HOST_CHOICES = ("random", "cycle")
QUERY_DAYS = 7  # the trigger comes a week after the host's last session (build_conv.py)
LOCOMO_TIME = "%I:%M %p on %d %B, %Y"  # LoCoMo's session dates: 1:56 pm on 8 May, 2023
_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_NUM_WORD = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_GAP = re.compile(
    r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a|an)\b\s*"
    r"(week|weeks|month|months|year|years)\b"
)
_SAMPLE_KEYS = ("cue_dialogue", "trigger_query", "time_gap")


def gap_days(time_gap: str) -> int:
    """Days back from the trigger to the cue, read as the reference's ``parse_time_gap``."""
    m = _GAP.search(time_gap.lower().strip())
    if not m:
        return 0
    num, unit = m.groups()
    count = int(num) if num.isdigit() else 1 if num in ("a", "an") else _NUM_WORD.get(num, 0)
    return count * {"w": 7, "m": 30, "y": 365}[unit[0]]


def ab_turns(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(speaker ``A``/``B``, text) for each line opening with ``A:`` or ``B:`` (the reference's
    ``parse_ab_dialogue``), and the other non-blank lines, which it drops."""
    turns, dropped = [], []
    for line in text.split("\n"):
        line = line.strip()
        if line.startswith(("A:", "B:")):
            turns.append((line[0], line[2:].strip()))
        elif line:
            dropped.append(line)
    return turns, dropped


def locomo_date(t: datetime) -> str:
    """A date in LoCoMo's own style (``1:56 pm on 8 May, 2023``), locale-independent."""
    hour = t.hour % 12 or 12
    half = "am" if t.hour < 12 else "pm"
    return f"{hour}:{t.minute:02d} {half} on {t.day} {_MONTHS[t.month - 1]}, {t.year}"


@dataclass
class Host:
    """A LoCoMo conversation ready to take a cue: its converted sessions and their times."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[dict[str, Any]]
    times: list[datetime]
    source: str = ""  # the LoCoMo file it is read from
    date_fields: list[str] = field(default_factory=list)  # each session's date field in it


@dataclass
class LocomoPlusReport(ImportReport):
    """The import report, with the seed and how often each conversation hosted a sample."""

    seed: int = DEFAULT_SEED
    host_choice: str = "random"
    hosts: Counter[str] = field(default_factory=Counter)

    def text(self) -> str:
        lines = super().text().split("\n")
        how = f"drawn with seed {self.seed}" if self.host_choice == "random" else "in turn"
        used = ", ".join(f"{h} x{n}" for h, n in sorted(self.hosts.items()))
        lines.insert(1, f"  host conversations {how}: {used or 'none'}")
        return "\n".join(lines)


def _whole(source: str, name: str, raw: str, low: int, high: int) -> int:
    if not re.fullmatch(r"[0-9]{1,10}", raw.strip()) or not low <= int(raw) <= high:
        raise import_error(
            source, None, "options", f"{name} must be a whole number {low}..{high}, got {raw!r}"
        )
    return int(raw)


def _paths(path: Path, locomo: str) -> tuple[Path, Path]:
    """(locomo_plus.json, LoCoMo's file) for a checkout folder or the file itself."""
    plus = path / PLUS_FILE if path.is_dir() else path
    if not plus.is_file():
        raise import_error(str(path), None, "source", f"holds no {PLUS_FILE}")
    host = Path(locomo) if locomo else plus.parent / LOCOMO_NAME
    if not host.exists():
        raise import_error(
            str(host), None, "locomo", "no such file (name LoCoMo's file with #locomo=PATH)"
        )
    return plus, host


def _plus_samples(name: str, data: Any) -> list[dict[str, str]]:
    """The samples of locomo_plus.json, each with string cue, trigger and gap."""
    if not isinstance(data, list):
        raise import_error(name, None, "file", "must be a list of samples")
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise import_error(name, f"sample {i}", "sample", "must be an object")
        check_record(name, f"sample {i}", item)
        for key in _SAMPLE_KEYS:
            if not isinstance(item.get(key), str):
                raise import_error(
                    name, f"sample {i}", key, f"must be a string, got {item.get(key)!r}"
                )
    if not data:
        raise import_error(name, None, "file", "holds no samples")
    return data


def _hosts(path: Path, budget: ReadBudget, report: LocomoPlusReport) -> list[Host]:
    """Every LoCoMo conversation of ``path`` with its sessions and parsed session times."""
    hosts = []
    for i, (name, record) in enumerate(read_samples(path, budget)):
        sample_id = str(record.get("sample_id") or f"conv-{i}")
        conv = conversation(name, sample_id, record)
        sessions = sample_sessions(name, sample_id, conv, report)  # type: ignore[arg-type]
        times, keys = [], []
        for session in sessions:
            key = f"conversation.{session['id'].replace('-', '_')}_date_time"
            keys.append(key)
            try:
                times.append(datetime.strptime(str(session.get("date", "")), LOCOMO_TIME))
            except ValueError:
                raise import_error(
                    name,
                    sample_id,
                    key,
                    f"must be a date like '1:56 pm on 8 May, 2023', got {session.get('date')!r}",
                ) from None
        if not sessions:
            raise import_error(name, sample_id, "conversation", "has no sessions to host a cue")
        hosts.append(
            Host(sample_id, conv["speaker_a"], conv["speaker_b"], sessions, times, name, keys)
        )
    return hosts


def _turns(
    host: Host, text: str, prefix: str, where: str, report: LocomoPlusReport
) -> list[dict[str, str]]:
    """The A/B lines of ``text`` as turns of ``host``'s speakers (A the user), ids ``prefix:n``."""
    parsed, dropped = ab_turns(text)
    for line in dropped:
        report.skip(where, f"line neither A: nor B: {line[:60]!r}")
    turns = []
    for n, (who, said) in enumerate(parsed, 1):
        if not said:
            report.skip(f"{where} line {n}", "empty turn")
            continue
        name, role = (host.speaker_a, "user") if who == "A" else (host.speaker_b, "assistant")
        turns.append({role: f"{name}: {said}", "id": f"{prefix}:{n}"})
    return turns


def _dates(plus_name: str, where: str, gap: str, host: Host) -> tuple[int, datetime, datetime]:
    """(gap days, trigger time, cue time) of a sample in ``host``; DialogueError naming the
    field when a date falls outside the calendar (years 1 to 9999): a gap of 3000 years, or a
    host session in year 9999."""
    try:
        days = gap_days(gap)
        back = timedelta(days=days)
    except (OverflowError, ValueError):  # more days than timedelta holds, digits than int reads
        raise import_error(
            plus_name, where, "time_gap", f"{gap[:60]!r}: a longer gap than a calendar holds"
        ) from None
    try:
        query_time = host.times[-1] + timedelta(days=QUERY_DAYS)
    except OverflowError:
        raise import_error(
            host.source,
            host.sample_id,
            host.date_fields[-1],
            f"{host.sessions[-1].get('date')!r}: the trigger a week later falls after year 9999",
        ) from None
    try:
        return days, query_time, query_time - back
    except OverflowError:
        raise import_error(
            plus_name,
            where,
            "time_gap",
            f"{gap[:60]!r}: {days:,} days before {locomo_date(query_time)} falls before year 1",
        ) from None


def _stitch(
    index: int, item: dict[str, Any], host: Host, report: LocomoPlusReport, plus_name: str = ""
) -> dict[str, Any] | None:
    """Sample ``index`` of ``plus_name`` stitched into ``host``; None (reported) when its cue or
    trigger is empty."""
    where = f"sample {index}"
    cue = _turns(host, item["cue_dialogue"], "cue", f"{where} cue_dialogue", report)
    trigger = _turns(host, item["trigger_query"], "trigger", f"{where} trigger_query", report)
    if not cue or not trigger:
        report.skip(where, f"no A:/B: turn in its {'cue_dialogue' if not cue else 'trigger_query'}")
        return None
    days, query_time, cue_time = _dates(plus_name, where, item["time_gap"], host)
    cue_session = {"id": "cue", "date": locomo_date(cue_time), "turns": cue}
    events = [*zip(host.times, host.sessions, strict=True), (cue_time, cue_session)]
    # a stable sort: a cue dated like a host session comes after it
    sessions = [s for _, s in sorted(events, key=lambda e: e[0])]
    names = {"A": host.speaker_a, "B": host.speaker_b}
    evidence_text = "\n".join(  # unified_input.py's evidence: full-width colon, no space
        f"{names[who]}：{said}" for who, said in ab_turns(item["cue_dialogue"])[0] if said
    )
    probe = {
        "id": "trigger",
        "question": "\n".join(t.get("user") or t.get("assistant") for t in trigger),
        "category": "cognitive",
        "evidence": [t["id"] for t in cue],
        "metadata": {
            RELATION_TYPE_KEY: str(item.get("relation_type", "")),
            TIME_GAP_KEY: item["time_gap"],
            GAP_DAYS_KEY: days,
            CUE_DATE_KEY: cue_session["date"],
            QUERY_DATE_KEY: locomo_date(query_time),
            JUDGE_EVIDENCE_KEY: evidence_text,
        },
    }
    report.dialogues += 1
    report.turns += sum(len(s["turns"]) for s in sessions)
    report.probes += 1
    report.hosts[host.sample_id] += 1
    return {
        "format": "memory-lab/dialogue@1",
        "id": slug(f"locomo-plus-{index}-{host.sample_id}"),
        "title": f"LoCoMo-Plus sample {index} in LoCoMo {host.sample_id}",
        "language": "en",
        "tags": ["locomo-plus"],
        "metadata": {"dataset": "locomo-plus", "sample": index, "host": host.sample_id},
        "sessions": [{**s, "turns": [dict(t) for t in s["turns"]]} for s in sessions],
        "probes": [probe],
    }


def import_locomo_plus(
    path: Path,
    locomo: str = "",
    seed: str = str(DEFAULT_SEED),
    host: str = "random",
    limit: str = "",
    budget: ReadBudget | None = None,
) -> ImportResult:
    """Import LoCoMo-Plus: ``path`` a Locomo-Plus checkout (or its ``locomo_plus.json``);
    ``locomo`` LoCoMo's file (default ``locomo10.json`` beside it); ``seed`` draws the host
    conversations (``host=random``) or ``host=cycle`` takes them in turn; ``limit`` the first N
    samples; ``budget`` bounds the bytes read, both files together."""
    source = str(path)
    seed_n = _whole(source, "seed", seed, 0, 2**32 - 1)
    count = _whole(source, "limit", limit, 1, 10**9) if limit else None
    if host not in HOST_CHOICES:
        raise import_error(
            source, None, "options", f"host must be one of {', '.join(HOST_CHOICES)}, got {host!r}"
        )
    budget = budget or ReadBudget()
    plus_file, locomo_path = _paths(path, locomo)
    items = _plus_samples(
        str(plus_file), read_json(str(plus_file), lambda: budget.read_file(plus_file))
    )
    report = LocomoPlusReport("locomo-plus", source, seed=seed_n, host_choice=host)
    hosts = _hosts(locomo_path, budget, report)
    rng = random.Random(seed_n)
    documents = []
    for i, item in enumerate(items[:count]):
        chosen = rng.choice(hosts) if host == "random" else hosts[i % len(hosts)]
        doc = _stitch(i, item, chosen, report, str(plus_file))
        if doc is not None:
            documents.append(doc)
    return ImportResult(documents, report)
