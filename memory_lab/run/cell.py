"""Replay one dialogue through one memory (docs/concepts.md) and emit records as they happen.

Every cell (``Cell``) gets a fresh memory and its own reader with the shared prompt. User turns
are teacher-forced: the cell records the prompt the chat model *would* receive (``prompt_for``),
then hands the scripted exchange to the memory (``observe``); whatever the memory's own models or
embeddings do meanwhile is metered per role and charged to that turn. When a session's last
exchange has been observed the memory is told (``end_session``), then the probes placed there
are asked. The prompt reads the memory only through ``PromptMemory`` (``bridge``), which never
writes, so asking never changes what is remembered. Probes placed after the same exchange are
recalled one after another, then, with ``--concurrency`` N and a provider reader, sent to the
model up to N at once (each thread with its own ``Answerer``): records are those of asking one
by one, built by ``probe_record``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langchain_classic.base_memory import BaseMemory

from memory_lab.dialogue.model import Dialogue, Probe
from memory_lab.errors import ConfigError
from memory_lab.log.records import ProbeRecord, TurnRecord, UsageRecord
from memory_lab.memories.protocol import (
    Exchange,
    MemoryResources,
    Recall,
    SessionInfo,
    part_cell_id,
    tokens_held,
)
from memory_lab.memories.registry import MemorySpec, build_memory
from memory_lab.models import model_name
from memory_lab.models.accounting import Meter, MeterCallback, Usage
from memory_lab.models.prompt import INPUT_KEY, MEMORY_KEY, OUTPUT_KEY, answer_prompt, render_prompt
from memory_lab.models.tokens import count_tokens
from memory_lab.run.bridge import FixedContext, PromptMemory, quiet_classic_deprecations
from memory_lab.run.context import RunModels
from memory_lab.run.exchanges import exchanges, session_ends
from memory_lab.run.pool import in_threads
from memory_lab.run.probe_record import (
    Answered,
    CellCounts,
    CellFacts,
    ProbeContext,
    probe_record,
)
from memory_lab.work_clock import cell_scope, clock

Emit = Callable[[dict[str, Any]], None]
EMBEDDINGS_ROLE = "embeddings"  # usage rows of a composite memory's part that embeds text


def cell_id_for(spec: MemorySpec, dialogue: Dialogue) -> str:
    """A unique, Chroma-safe collection name: never reused, even across runs."""
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in f"{spec.name}.{dialogue.id}")
    return f"ml-{safe[:200]}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class TurnPrompt:
    """The exact prompt one turn sends (``text``): the memory's context for the turn's input
    (after any context limit) in the run's answer prompt, with what the memory recalled and what
    reading it took (``PromptMemory``'s ``truncated``, ``cut_tokens`` and ``recall_seconds``)."""

    text: str
    context: str
    recall: Recall | None
    truncated: bool = False
    cut_tokens: int = 0
    recall_seconds: float = 0.0


@dataclass
class Answerer:
    """A reader (and judge) with meters of their own, over a ``FixedContext``: one per thread
    answering a cell's probes."""

    chain: Any
    fixed_context: FixedContext
    meter: Meter
    callback: MeterCallback
    judge: Any = None
    judge_meter: Meter = field(default_factory=Meter)

    def invoke(self, text: str, chain: Any = None) -> tuple[str, str, Usage]:
        """Ask ``chain`` (default: this answerer's own) through this reader; the reply, the
        exact prompt the model saw, and the model's usage for this call alone."""
        self.meter.take()
        self.callback.take_prompts()
        reply = str((self.chain if chain is None else chain).invoke({INPUT_KEY: text})[OUTPUT_KEY])
        prompts = self.callback.take_prompts()
        return reply, prompts[-1] if prompts else "", self.meter.take()

    def answer(self, context: str, question: str) -> Answered:
        """Answer ``question`` over ``context`` (recalled beforehand) with this reader."""
        self.fixed_context.context = context
        answering = clock()
        reply, prompt, usage = self.invoke(question)
        return Answered(reply, prompt, usage, clock() - answering)


class Cell:
    """One (memory, dialogue) replay with its own memory, chain and meters.

    ``prompt_for`` gives the exact prompt a turn would send now (the run, ``inspect`` and
    ``serve`` all read the memory through it); ``last_prompt`` is the last one built or sent.
    ``cell_id`` names the cell's state (its thread, Store namespace, collection); by default a
    new one every time (``cell_id_for``). ``memory-lab serve`` gives a user's own, so a memory
    kept on a server finds that user's state again after a restart.
    """

    def __init__(
        self, spec: MemorySpec, dialogue: Dialogue, models: RunModels, cell_id: str | None = None
    ):
        self.spec = spec
        self.dialogue = dialogue
        self.models = models
        self.held: int | None = None  # the footprint at the last session end
        self.last_prompt: TurnPrompt | None = None  # of the last turn or look (``prompt_for``)
        config = models.config
        factory = spec.factory
        self.roles = ("memory", *(r for r in factory.roles if r != "memory"))
        self.role_meters = {role: Meter() for role in self.roles}
        self.counts = CellCounts()  # its prompts' and contexts' tokens, counted as they grow
        self.embedding_meter = Meter()
        # a composite memory's parts: label -> (their role meters, their embedding meter)
        self.part_meters: dict[str, tuple[dict[str, Meter], Meter]] = {}
        role_models = {role: self._role_model(role, self.role_meters[role]) for role in self.roles}
        cell_id = cell_id or cell_id_for(spec, dialogue)
        self.resources = MemoryResources(
            models=role_models,
            embeddings=models.memory_embeddings(self.embedding_meter.add_embedding),
            cell_id=cell_id,
            memory_name=spec.name,
            tokenizer=count_tokens,
            resources=models.resources,
            cell_dir=str(Path(models.work_dir) / "cells" / cell_id) if models.work_dir else None,
            timestamps=config.timestamps,
            part_resources=self._part_resources,
        )
        try:
            self._build(spec, dialogue, models)
        except BaseException:
            self.resources.close()  # what the memory opened so far (connections, files) goes
            raise

    def _build(self, spec: MemorySpec, dialogue: Dialogue, models: RunModels) -> None:
        config = models.config
        self.facts = CellFacts.of(spec, dialogue)
        self.memory = build_memory(spec, self.resources)
        self.resources.on_close(self.memory.close)
        self._prompt_memory = PromptMemory(
            memory=self.memory, limit=config.window().limit, style=config.answer_style
        )
        # answerer 0 is the cell's own reader and judge: its chain over ``_prompt_memory``
        # replays live turns (``_invoke``), its chain over a fixed context answers probes
        own = self._new_answerer()
        self.answerers = [own]
        self._chain = self._answer_chain(own.chain.llm, self._prompt_memory)

    def _answer_chain(self, reader: Any, memory: BaseMemory) -> Any:
        """The answering chain: ``reader`` with the run's answer prompt over ``memory``."""
        from langchain_classic.chains import ConversationChain

        return ConversationChain(
            llm=reader,
            prompt=answer_prompt(self.models.config.answer_style),
            memory=memory,
            input_key=INPUT_KEY,
            output_key=OUTPUT_KEY,
        )

    def _new_answerer(self) -> Answerer:
        """A reader over a ``FixedContext`` with a meter of its own, and the run's judge (if
        any) with another."""
        config = self.models.config
        meter = Meter()
        callback = MeterCallback(meter)
        reader = self.models.chat_model(config.llm, "reader")
        reader.callbacks = [callback]
        fixed = FixedContext()
        answerer = Answerer(self._answer_chain(reader, fixed), fixed, meter, callback)
        if config.judge:
            answerer.judge = self.models.judge_panel(answerer.judge_meter)
        return answerer

    def _answerer(self, n: int) -> Answerer:
        """The ``n``-th answerer (0: the cell's own reader and judge; others made on demand)."""
        while len(self.answerers) <= n:
            self.answerers.append(self._new_answerer())
        return self.answerers[n]

    def _role_model(self, role: str, meter: Meter, name: str | None = None) -> Any:
        """The chat model serving ``role`` for this cell, its calls charged to ``meter``."""
        model = self.models.chat_model(self.models.config.role_spec(role), role)
        model.callbacks = [MeterCallback(meter)]
        if "memory_name" in type(model).model_fields:
            model.memory_name = name or self.spec.name  # an offline-model error names the memory
        return model

    def _part_resources(self, label: str, roles: tuple[str, ...]) -> MemoryResources:
        """Resources for one part of a composite memory, metered apart under ``label``."""
        if label in self.part_meters:
            raise ConfigError(f"memory '{self.spec.label}' has two parts labelled {label!r}")
        meters = {role: Meter() for role in ("memory", *(r for r in roles if r != "memory"))}
        embedding_meter = Meter()
        self.part_meters[label] = (meters, embedding_meter)
        name = f"{self.spec.name}/{label}"
        res = self.resources
        return replace(
            res,
            models={role: self._role_model(role, m, name) for role, m in meters.items()},
            embeddings=self.models.memory_embeddings(embedding_meter.add_embedding),
            cell_id=part_cell_id(res.cell_id, label),
            memory_name=name,
            cell_dir=str(Path(res.cell_dir) / part_cell_id("", label)) if res.cell_dir else None,
            closers=res.closers,
            part_resources=None,
        )

    def _ids(self) -> dict[str, str]:
        return self.facts.ids

    def at(self, ex: Exchange) -> None:
        """Recall from now on happens in ``ex``'s session."""
        memory = self._prompt_memory
        memory.session_id, memory.session_date = ex.session_id, ex.session_date

    def prompt_for(self, text: str, ex: Exchange) -> TurnPrompt:
        """The exact prompt a turn saying ``text`` in ``ex``'s session would send now.

        The memory's context for ``text`` (after any context limit), rendered with the run's
        answer style: what a replayed turn records, what a probe's reader is given, what
        ``inspect`` and ``serve`` show. Reading never writes to the memory; what it costs the
        memory's models stays metered to the cell (``maintenance``). Kept as ``last_prompt``.
        """
        self.at(ex)
        context = self._prompt_memory.load_memory_variables({INPUT_KEY: text})[MEMORY_KEY]
        return self._read(render_prompt(context, text, self.models.config.answer_style))

    def _read(self, prompt: str) -> TurnPrompt:
        """``prompt`` with what the last reading of the memory gave it; kept as ``last_prompt``."""
        memory = self._prompt_memory
        self.last_prompt = TurnPrompt(
            prompt,
            memory.context,
            memory.recall,
            memory.truncated,
            memory.cut_tokens,
            memory.recall_seconds,
        )
        return self.last_prompt

    def _turn(self, ex: Exchange) -> TurnRecord:
        return TurnRecord(
            **self._ids(),
            language=self.dialogue.language,
            session=ex.session_id,
            turn_id=ex.user_turn_id or ex.assistant_turn_ids[0],
            exchange=ex.index,
            session_date=ex.session_date,
        )

    def maintenance(self) -> tuple[Usage, list[tuple[str, str | None, Usage]]]:
        """What the memory's models and embeddings cost since the last call: the total, and
        ``(role, part, usage)`` for every role called (a part's embeddings: role ``embeddings``).
        """
        total = self.embedding_meter.take()
        by_role: list[tuple[str, str | None, Usage]] = []
        meters = [(None, self.role_meters, None)]
        meters += [(part, m, e) for part, (m, e) in self.part_meters.items()]
        for part, role_meters, embedding_meter in meters:
            for role, meter in role_meters.items():
                usage = meter.take()
                total.llm_calls += usage.llm_calls
                total.cache_hits += usage.cache_hits
                total.input_tokens += usage.input_tokens
                total.output_tokens += usage.output_tokens
                if usage.llm_calls:
                    by_role.append((role, part, usage))
            if embedding_meter is not None:
                usage = embedding_meter.take()
                total.embedding_tokens += usage.embedding_tokens
                if usage.embedding_tokens:
                    by_role.append((EMBEDDINGS_ROLE, part, usage))
        return total, by_role

    def _usage_records(
        self, ex: Exchange, by_role: list[tuple[str, str | None, Usage]]
    ) -> list[UsageRecord]:
        config = self.models.config
        return [
            UsageRecord(
                **self._ids(),
                exchange=ex.index,
                role=role,
                model=config.embeddings
                if role == EMBEDDINGS_ROLE
                else model_name(config.role_spec(role), role),
                llm_calls=u.llm_calls,
                cache_hits=u.cache_hits,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                embedding_tokens=u.embedding_tokens,
                part=part,
            )
            for role, part, u in by_role
        ]

    def _invoke(self, text: str) -> tuple[str, str, Usage]:
        """Ask the chain over the memory's prompt memory (a live turn) with answerer 0's reader."""
        return self.answerers[0].invoke(text, self._chain)

    def replay_exchange(
        self, ex: Exchange, ends_session: int | None = None
    ) -> list[TurnRecord | UsageRecord]:
        """Record the would-be prompt for the user turn, then hand the exchange to the memory.

        ``ends_session`` (the session's 0-based index) when ``ex`` is its session's last
        exchange: the memory is then told the session ended, and what that costs is charged to
        this turn, and the turn record carries the memory's footprint (``tokens_held``).
        In ``live`` mode the reader answers the user turn and its reply is saved instead.
        Returns the turn record, then one usage record per memory model role called.
        """
        started = clock()
        self.at(ex)
        record = self._turn(ex)
        if ex.user_turn_id is not None:
            if self.models.config.mode == "live":
                reply, prompt, answer = self._invoke(ex.user)
                turn = self._read(prompt)  # the prompt the model was sent
                counted = count_tokens(prompt)
                record.prompt_tokens = answer.input_tokens or counted
                record.prompt_tokens_counted = counted
                record.completion_tokens = answer.output_tokens or count_tokens(reply)
                record.reply = reply
                ex = Exchange(**{**ex.__dict__, "assistant": reply})
            else:
                turn = self.prompt_for(ex.user, ex)
                record.prompt_tokens = self.counts.prompts.count(turn.text)
                record.completion_tokens = count_tokens(ex.assistant)
            record.context_tokens = self.counts.contexts.count(turn.context)
            record.truncated = turn.truncated
            record.context_cut_tokens = turn.cut_tokens
            record.recall_seconds = turn.recall_seconds
            if self.models.config.record_prompts:
                record.prompt = turn.text
        saving = clock()
        self.memory.observe(ex)
        if ends_session is not None:
            self.memory.end_session(SessionInfo(ex.session_id, ex.session_date, ends_session))
        record.save_seconds = clock() - saving
        usage, by_role = self.maintenance()
        record.memory_llm_calls = usage.llm_calls
        record.memory_cache_hits = usage.cache_hits
        record.memory_input_tokens = usage.input_tokens
        record.memory_output_tokens = usage.output_tokens
        record.embedding_tokens = usage.embedding_tokens
        record.memory_tokens = usage.total
        record.seconds = clock() - started
        if ends_session is not None:  # counted after the clock stops: measuring is not saving
            record.memory_tokens_held = self.held = self.tokens_held()
        return [record, *self._usage_records(ex, by_role)]

    def ask(self, probe: Probe, ex: Exchange) -> ProbeRecord:
        """Ask a probe through the chain (the memory read-only) and score the reply."""
        return self.answer(probe, ex, self.recall_for(probe, ex), self.answerers[0])

    def ask_all(self, probes: list[Probe], ex: Exchange) -> Iterator[ProbeRecord]:
        """Ask the probes placed after ``ex``, in order: recalled one by one, then answered up
        to ``probe_concurrency`` at once; the records are those of asking one by one."""
        width = min(len(probes), self.models.probe_concurrency())
        if width <= 1:
            for probe in probes:
                yield self.ask(probe, ex)
            return
        recalled = [self.recall_for(probe, ex) for probe in probes]
        answerers = [self._answerer(n) for n in range(width)]
        gate = self.models.probe_gate()

        def answer(n: int, i: int) -> ProbeRecord:
            with gate:
                return self.answer(probes[i], ex, recalled[i], answerers[n])

        yield from in_threads(answer, len(probes), width)

    def recall_for(self, probe: Probe, ex: Exchange) -> ProbeContext:
        """Read what the memory puts into this probe's prompt, and what that cost."""
        started = clock()
        self.maintenance()
        turn = self.prompt_for(probe.question, ex)
        usage, _ = self.maintenance()
        seconds = clock() - started
        return ProbeContext(
            turn.context,
            turn.recall,
            turn.truncated,
            usage,
            seconds,
            turn.recall_seconds,
            turn.cut_tokens,
        )

    def answer(
        self, probe: Probe, ex: Exchange, recalled: ProbeContext, answerer: Answerer
    ) -> ProbeRecord:
        """Answer a recalled probe with ``answerer`` (safe in a thread); its record is scored
        by ``probe_record`` and timed here, recall included."""
        started = clock()
        answered = answerer.answer(recalled.context, probe.question)
        record = probe_record(
            probe, ex, self.facts, recalled, answered, answerer.judge, counts=self.counts
        )
        record.seconds = recalled.seconds + clock() - started
        return record

    def snapshot(self) -> dict[str, Any]:
        """What the memory holds now (its own ``snapshot()``)."""
        return self.memory.snapshot()

    def tokens_held(self) -> int:
        """The memory's footprint now: the tokens of the texts it holds (``held_texts``)."""
        return tokens_held(self.memory, self.resources.count_tokens)

    def close(self) -> None:
        self.resources.close()


def replay_dialogue(
    spec: MemorySpec,
    dialogue: Dialogue,
    models: RunModels,
    emit: Emit,
    on_exchange: Callable[[], None] | None = None,
) -> int | None:
    """Replay ``dialogue`` through a fresh ``spec`` memory, emitting records as dicts.

    Returns the memory's footprint at the dialogue's end (tokens held; None with no exchange).
    """
    with open_cell(spec, dialogue, models) as cell:
        exs = exchanges(dialogue)
        where = {tid: ex for ex in exs for tid in ex.turn_ids}
        due: dict[int, list[Probe]] = {}
        for probe in dialogue.probes:
            due.setdefault(where[probe.after].index, []).append(probe)
        for ex, records in replayed(cell):
            for record in records:
                emit(record.to_dict())
            for probe_record in cell.ask_all(due.get(ex.index, []), ex):
                emit(probe_record.to_dict())
            if on_exchange is not None:
                on_exchange()
    return cell.held


@contextmanager
def open_cell(
    spec: MemorySpec, dialogue: Dialogue, models: RunModels, cell_id: str | None = None
) -> Iterator[Cell]:
    """A fresh ``Cell`` (classic memories' deprecation warnings quiet), closed at the end; an
    error while closing after the replay's own error is noted on that error, not raised."""
    with quiet_classic_deprecations(), cell_scope():  # cached work charged to the cell
        cell = Cell(spec, dialogue, models, cell_id)
        try:
            yield cell
        except BaseException as exc:
            try:
                cell.close()
            except Exception as close_error:  # noqa: BLE001 - the cell's own error is recorded
                exc.add_note(f"while closing the cell: {type(close_error).__name__}: {close_error}")
            raise
        cell.close()


def replayed(
    cell: Cell, count: int | None = None
) -> Iterator[tuple[Exchange, list[TurnRecord | UsageRecord]]]:
    """Hand the cell's dialogue to it exchange by exchange (the first ``count``; default all),
    each session's last exchange ending its session; yields each exchange with its records."""
    exs = exchanges(cell.dialogue)
    ends = session_ends(cell.dialogue, exs)
    for ex, end in zip(exs[:count], ends, strict=False):
        yield ex, cell.replay_exchange(ex, end)
