"""Replay one dialogue through one memory (docs/concepts.md) and emit records as they happen.

Every cell gets a fresh memory and one ``ConversationChain`` with the shared prompt. User turns are
teacher-forced: the runner records the prompt the chat model *would* receive, then hands the
scripted exchange to the memory (``observe``); whatever the memory's own models or embeddings do
meanwhile is metered per role and charged to that turn. When a session's last exchange has been
observed the memory is told (``end_session``), then the probes placed there are asked through
the same chain. The chain reads the memory only through ``PromptMemory``, which never writes, so
asking never changes what is remembered. Probes placed after the same exchange are recalled one
after another, then, with ``--concurrency`` N and a provider reader, sent to the model up to N
at once (each thread with its own reader and meters): records are those of asking one by one.
"""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core._api import LangChainDeprecationWarning
from langchain_core.embeddings import Embeddings

from memory_lab.dialogue.model import EVIDENCE_JUDGED, Dialogue, Probe, Session, Turn
from memory_lab.log.config import RunConfig
from memory_lab.log.records import ProbeRecord, TurnRecord, UsageRecord
from memory_lab.memories.protocol import (
    Exchange,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
    part_cell_id,
    render_recall,
    tokens_held,
)
from memory_lab.memories.registry import MemorySpec, build_memory, factory_for
from memory_lab.models import (
    READER_RETRIEVAL_MODEL,
    is_offline,
    model_name,
    resolve_chat_model,
)
from memory_lab.models.accounting import Meter, MeterCallback, Usage
from memory_lab.models.embeddings import OfflineEmbeddings, offline_embedding_model
from memory_lab.models.prompt import INPUT_KEY, MEMORY_KEY, OUTPUT_KEY, answer_prompt, render_prompt
from memory_lab.models.providers import MeteredEmbeddings, provider_embeddings
from memory_lab.models.tokens import count_tokens, encoding, token_ids
from memory_lab.scoring.answers import answer_scores
from memory_lab.scoring.probes import evidence_recall, score_probe
from memory_lab.scoring.ranks import rank_scores
from memory_lab.text.redact import remember_resources

Emit = Callable[[dict[str, Any]], None]
EMBEDDINGS_ROLE = "embeddings"  # usage rows of a composite memory's part that embeds text


@contextmanager
def quiet_classic_deprecations() -> Iterator[None]:
    """Silence langchain-classic's deprecation warnings, here and only here.

    The classic memories and ``ConversationChain`` are deprecated upstream in favour of LangGraph;
    measuring them is this project's purpose, so the warnings would only bury real output.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LangChainDeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def exchanges(dialogue: Dialogue) -> list[Exchange]:
    """Group turns into exchanges: each user turn with the assistant turns after it.

    An exchange never spans two sessions: a session that opens with the assistant starts an
    exchange with no user turn.
    """
    out: list[Exchange] = []

    def close(session: Session, user: Turn | None, replies: list[Turn]) -> None:
        out.append(
            Exchange(
                index=len(out),
                user=user.text if user else "",
                assistant="\n".join(t.text for t in replies),
                user_turn_id=user.id if user else None,
                assistant_turn_ids=tuple(t.id for t in replies),
                session_id=session.id,
                session_date=session.date,
            )
        )

    for session in dialogue.sessions:
        user: Turn | None = None
        replies: list[Turn] = []
        for turn in session.turns:
            if turn.role == "user":
                if user is not None or replies:
                    close(session, user, replies)
                user, replies = turn, []
            else:
                replies.append(turn)
        if user is not None or replies:
            close(session, user, replies)
    return out


def session_ends(dialogue: Dialogue, exs: list[Exchange]) -> list[int | None]:
    """For each exchange, its session's index if it is that session's last exchange, else None."""
    sessions = [s.id for s in dialogue.sessions]
    return [
        sessions.index(ex.session_id)
        if i + 1 == len(exs) or exs[i + 1].session_id != ex.session_id
        else None
        for i, ex in enumerate(exs)
    ]


@dataclass
class RunModels:
    """A run's configuration plus its live, run-wide parts: embedding caches and call cache.

    ``resources`` are the run-wide named resources (``--resource NAME=VALUE``): handed to
    memories, never written to any file. ``work_dir`` is the results folder (memories that
    keep files get a folder per cell under it).
    """

    config: RunConfig = field(default_factory=RunConfig)
    embeddings: OfflineEmbeddings | None = None
    memory_offline_embeddings: OfflineEmbeddings | None = None
    reader_retrieval: OfflineEmbeddings | None = None
    provider_embeddings: MeteredEmbeddings | None = None
    call_cache: Any = None
    cache_dir: str | None = None
    resources: Mapping[str, str] = field(default_factory=dict)
    work_dir: str | None = None
    _probe_gate: threading.BoundedSemaphore | None = field(default=None, repr=False)

    @classmethod
    def create(
        cls,
        config: RunConfig | None = None,
        *,
        cache_dir: str | None = None,
        resources: Mapping[str, str] | None = None,
        work_dir: str | None = None,
        **settings: Any,
    ) -> RunModels:
        """Build the run-wide parts for ``config`` (or a RunConfig of ``settings``).

        The resources' and base URL's secrets are masked in this process's errors from here on
        (each worker process builds its models, so learns them too).
        """
        config = config or RunConfig(**settings)
        remember_resources(resources, config.base_url)
        call_cache = None
        if cache_dir is not None:
            from memory_lab.models.cache import CallCache

            call_cache = CallCache(cache_dir)
        provider = None
        store = None
        if cache_dir is not None:  # offline e5 vectors are kept beside the model calls
            from memory_lab.models.cache import offline_embedding_store

            store = offline_embedding_store(cache_dir)
        offline_key = offline_embedding_model(config.embeddings)
        memory_offline = OfflineEmbeddings(model=offline_key, store=store) if offline_key else None
        if offline_key is None:
            inner = provider_embeddings(config.embeddings, base_url=config.base_url)
            if cache_dir is not None:
                from memory_lab.models.cache import cached_embeddings

                inner = cached_embeddings(inner, Path(cache_dir), config.embeddings)
            provider = MeteredEmbeddings(inner)
        # The offline reader ranks with e5; it shares the memories' e5 cache when they use e5.
        if memory_offline is not None and memory_offline.model == READER_RETRIEVAL_MODEL:
            reader_retrieval = memory_offline
        else:
            reader_retrieval = OfflineEmbeddings(model=READER_RETRIEVAL_MODEL, store=store)
        return cls(
            config=config,
            embeddings=OfflineEmbeddings(),  # always: the offline reader uses it
            memory_offline_embeddings=memory_offline,
            reader_retrieval=reader_retrieval,
            provider_embeddings=provider,
            call_cache=call_cache,
            cache_dir=cache_dir,
            resources=dict(resources or {}),
            work_dir=work_dir,
        )

    def chat_model(self, spec: str, role: str) -> Any:
        """A chat model for a role; real providers go through the on-disk call cache."""
        model = resolve_chat_model(
            spec,
            role,
            embeddings=self.shared_embeddings(),
            base_url=self.config.base_url,
            retrieval=self.reader_retrieval,
        )
        if not is_offline(spec) and self.call_cache is not None:
            from memory_lab.models.cache import cached_chat_model

            model = cached_chat_model(model, self.call_cache)
        return model

    def judge_panel(self, meter: Meter) -> Any:
        """The run's judge (``--judge``): a model per grading prompt and run, through the call
        cache, every call charged to ``meter`` (``judge.build_panel``)."""
        from memory_lab.scoring.judge import build_panel, judge_templates

        config = self.config
        assert config.judge is not None
        return build_panel(
            config.judge,
            judge_templates(config.judge_prompts),
            config.judge_runs,
            temperature=config.judge_temperature,
            base_url=config.base_url,
            cache=self.call_cache,
            callbacks=[MeterCallback(meter)],
        )

    def memory_embeddings(self, on_embed: Callable[[int], None]) -> Embeddings:
        """The embeddings memories use (offline or a provider's), metered per cell."""
        if self.memory_offline_embeddings is not None:
            return self.memory_offline_embeddings.view(on_embed)
        if self.provider_embeddings is None:
            raise ValueError("RunModels.provider_embeddings must be set (use RunModels.create())")
        return self.provider_embeddings.view(on_embed)

    def probe_concurrency(self) -> int:
        """Probes after one exchange asked at once: ``--concurrency`` for a provider reader.

        The offline reader is CPU-bound, so threads would only contend: it asks one by one.
        """
        if is_offline(self.config.llm):
            return 1
        return self.config.concurrency

    def probe_gate(self) -> threading.BoundedSemaphore:
        """At most ``probe_concurrency`` probe requests in flight across this process's cells."""
        assert self._probe_gate is not None
        return self._probe_gate

    def __post_init__(self) -> None:
        # made here, not on first use: cells in threads would race to make one each
        self._probe_gate = threading.BoundedSemaphore(self.probe_concurrency())

    def shared_embeddings(self) -> OfflineEmbeddings:
        if self.embeddings is None:
            raise ValueError("RunModels.embeddings must be set (use RunModels.create())")
        return self.embeddings


def cell_id_for(spec: MemorySpec, dialogue: Dialogue) -> str:
    """A unique, Chroma-safe collection name: never reused, even across runs."""
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in f"{spec.name}.{dialogue.id}")
    return f"ml-{safe[:200]}-{uuid.uuid4().hex[:12]}"


class PromptMemory(BaseMemory):
    """The one bridge from a ``Memory`` to the ``ConversationChain``: read-only.

    It asks the memory to recall for the chain's input (with the session the runner set),
    renders the ``Recall`` into the ``history`` text, and, with a ``limit``, drops the oldest
    part of that text at a line boundary so template + context + input fit in ``limit`` tokens
    (``truncated`` is then set, and ``cut_tokens`` is the tokens dropped: the whole text's count
    less the kept text's). ``context`` and ``recall`` keep what the last prompt held,
    ``recall_seconds`` how long reading it took (recall, rendering and any cut).
    """

    memory: Any
    limit: int | None = None
    style: str = "conversation"  # the answer style, whose template the limit budgets for
    session_id: str | None = None
    session_date: str | None = None
    context: str = ""
    recall: Recall | None = None
    truncated: bool = False
    cut_tokens: int = 0
    recall_seconds: float = 0.0

    @property
    def memory_variables(self) -> list[str]:
        return [MEMORY_KEY]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        text = str(inputs.get(INPUT_KEY, ""))
        self.recall = self.memory.recall(Query(text, self.session_id, self.session_date))
        context = render_recall(self.recall)
        self.truncated, self.cut_tokens = False, 0
        if self.limit is not None:
            budget = self.limit - count_tokens(render_prompt("", text, self.style))
            whole = count_tokens(context)
            self.truncated = whole > budget
            if self.truncated:
                ids = token_ids(context)
                kept = encoding().decode(ids[len(ids) - max(0, budget) :]) if budget > 0 else ""
                cut = kept.find("\n")
                context = kept[cut + 1 :] if cut != -1 else ""
                self.cut_tokens = whole - count_tokens(context)
        self.context = context
        self.recall_seconds = time.perf_counter() - started
        return {MEMORY_KEY: context}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Read-only: the runner hands exchanges to the memory itself (``observe``)."""

    def clear(self) -> None:
        """Read-only."""


class FixedContext(BaseMemory):
    """A probe's memory text, recalled beforehand through ``PromptMemory``: the chain that
    answers it reads this, so probes can be answered in threads while recall stays in order."""

    context: str = ""

    @property
    def memory_variables(self) -> list[str]:
        return [MEMORY_KEY]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {MEMORY_KEY: self.context}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Read-only."""

    def clear(self) -> None:
        """Read-only."""


@dataclass
class Answerer:
    """A reader (and judge) with meters of their own, over a ``FixedContext``: one per thread
    answering a cell's probes."""

    chain: Any
    view: FixedContext
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


@dataclass
class Recalled:
    """What the memory gave one probe's prompt, and what recalling it cost."""

    context: str
    recall: Recall | None
    truncated: bool
    usage: Usage
    seconds: float
    recall_seconds: float = 0.0  # the memory read alone (``PromptMemory.recall_seconds``)
    cut_tokens: int = 0  # memory text the context limit dropped (``PromptMemory.cut_tokens``)


class Cell:
    """One (memory, dialogue) replay with its own memory, chain and meters.

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
        config = models.config
        factory = factory_for(spec.name, spec.source)
        self.roles = ("memory", *(r for r in factory.roles if r != "memory"))
        self.role_meters = {role: Meter() for role in self.roles}
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
        self.turn_text = {t.id: t.text for t in dialogue.turns}
        self.turn_session = {t.id: t.session_id for t in dialogue.turns}
        self.memory = build_memory(spec, self.resources)
        self.resources.on_close(self.memory.close)
        self.view = PromptMemory(
            memory=self.memory, limit=config.window().limit, style=config.answer_style
        )
        # answerer 0 is the cell's own reader and judge: its chain over ``view`` replays live
        # turns (``_invoke``), its chain over a fixed context answers probes
        own = self._new_answerer()
        self.answerers = [own]
        self.chain = self._answer_chain(own.chain.llm, self.view)

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
        view = FixedContext()
        answerer = Answerer(self._answer_chain(reader, view), view, meter, callback)
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
            raise ValueError(f"memory '{self.spec.label}' has two parts labelled {label!r}")
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
        return {
            "memory": self.spec.label,
            "memory_name": self.spec.name,
            "dialogue": self.dialogue.id,
        }

    def at(self, ex: Exchange) -> None:
        """Recall from now on happens in ``ex``'s session."""
        self.view.session_id, self.view.session_date = ex.session_id, ex.session_date

    def memory_context(self, user_input: str) -> str:
        """What the memory puts into the prompt for this input (after any context limit)."""
        return self.view.load_memory_variables({INPUT_KEY: user_input})[MEMORY_KEY]

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
        """Ask the chain over the memory's view (a live turn) with answerer 0's reader."""
        return self.answerers[0].invoke(text, self.chain)

    def replay_exchange(
        self, ex: Exchange, ends_session: int | None = None
    ) -> list[TurnRecord | UsageRecord]:
        """Record the would-be prompt for the user turn, then hand the exchange to the memory.

        ``ends_session`` (the session's 0-based index) when ``ex`` is its session's last
        exchange: the memory is then told the session ended, and what that costs is charged to
        this turn, and the turn record carries the memory's footprint (``tokens_held``).
        Returns the turn record, then one usage record per memory model role called.
        """
        started = time.perf_counter()
        self.at(ex)
        record = self._turn(ex)
        if ex.user_turn_id is not None and self.models.config.mode == "live":
            reply, prompt, answer = self._invoke(ex.user)
            counted = count_tokens(prompt)
            record.prompt_tokens = answer.input_tokens or counted
            record.prompt_tokens_counted = counted
            record.context_tokens = count_tokens(self.view.context)
            record.completion_tokens = answer.output_tokens or count_tokens(reply)
            record.truncated = self.view.truncated
            record.context_cut_tokens = self.view.cut_tokens
            record.reply = reply
            record.recall_seconds = self.view.recall_seconds
            if self.models.config.record_prompts:
                record.prompt = prompt
            ex = Exchange(**{**ex.__dict__, "assistant": reply})
        elif ex.user_turn_id is not None:
            context = self.memory_context(ex.user)
            prompt = render_prompt(context, ex.user, self.models.config.answer_style)
            record.prompt_tokens = count_tokens(prompt)
            record.context_tokens = count_tokens(context)
            record.completion_tokens = count_tokens(ex.assistant)
            record.truncated = self.view.truncated
            record.context_cut_tokens = self.view.cut_tokens
            record.recall_seconds = self.view.recall_seconds
            if self.models.config.record_prompts:
                record.prompt = prompt
        saving = time.perf_counter()
        self.memory.observe(ex)
        if ends_session is not None:
            self.memory.end_session(SessionInfo(ex.session_id, ex.session_date, ends_session))
        record.save_seconds = time.perf_counter() - saving
        usage, by_role = self.maintenance()
        record.memory_llm_calls = usage.llm_calls
        record.memory_cache_hits = usage.cache_hits
        record.memory_input_tokens = usage.input_tokens
        record.memory_output_tokens = usage.output_tokens
        record.embedding_tokens = usage.embedding_tokens
        record.memory_tokens = usage.total
        record.seconds = time.perf_counter() - started
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

    def recall_for(self, probe: Probe, ex: Exchange) -> Recalled:
        """Read what the memory puts into this probe's prompt, and what that cost."""
        started = time.perf_counter()
        self.at(ex)
        self.maintenance()
        context = self.memory_context(probe.question)
        usage, _ = self.maintenance()
        view = self.view
        seconds = time.perf_counter() - started
        return Recalled(
            context,
            view.recall,
            view.truncated,
            usage,
            seconds,
            view.recall_seconds,
            view.cut_tokens,
        )

    def answer(
        self, probe: Probe, ex: Exchange, recalled: Recalled, answerer: Answerer
    ) -> ProbeRecord:
        """Answer a recalled probe with ``answerer`` (safe in a thread) and score the reply."""
        started = time.perf_counter()
        answerer.view.context = recalled.context
        answering = time.perf_counter()
        reply, prompt, answer_usage = answerer.invoke(probe.question)
        answer_seconds = time.perf_counter() - answering
        memory_usage = recalled.usage
        context = recalled.context
        counted_prompt = count_tokens(prompt)
        score = score_probe(probe, reply, context)
        field_scores = answer_scores(
            reply, probe.answers, (probe.metadata or {}).get("locomo_category")
        )
        recalled_ids = recalled.recall.turn_ids if recalled.recall is not None else ()
        evidence = {e: self.turn_text[e] for e in probe.evidence if e in self.turn_text}
        recall_share = (
            None
            if probe.category == "abstention"
            else evidence_recall(evidence, context, recalled_ids)
        )
        ranks = rank_scores(
            recalled.recall.ranking if recalled.recall is not None else None,
            () if probe.category == "abstention" else probe.evidence,
            self.turn_session,
        )
        record = ProbeRecord(
            **self._ids(),
            language=self.dialogue.language,
            probe_id=probe.id,
            category=probe.category,
            after=probe.after,
            exchange=ex.index,
            question=probe.question,
            answers=list(probe.answers),
            stale_answers=list(probe.stale),
            derived=probe.derived,
            reply=reply,
            correct=score.correct,
            context_hit=score.context_hit,
            stale=score.stale,
            abstained=score.abstained,
            # the provider's own usage when it reports one; our tokenizer's count beside it
            prompt_tokens=answer_usage.input_tokens or counted_prompt,
            completion_tokens=answer_usage.output_tokens or count_tokens(reply),
            prompt_tokens_counted=counted_prompt,
            usage_source="provider" if answer_usage.input_tokens else "tokenizer",
            cache_hit=answer_usage.cache_hits > 0,
            context_tokens=count_tokens(context),
            truncated=recalled.truncated,
            context_cut_tokens=recalled.cut_tokens,
            memory_tokens=memory_usage.total,
            embedding_tokens=memory_usage.embedding_tokens,
            seconds=0.0,
            recall_seconds=recalled.recall_seconds,
            answer_seconds=answer_seconds,
            prompt=prompt,
            evidence=list(probe.evidence),
            evidence_recall=recall_share,
            recalled_turns=list(recalled_ids) if recalled_ids else None,
            **ranks,
            f1_locomo=field_scores.f1_locomo,
            f1_mem0=field_scores.f1_mem0,
            bleu1=field_scores.bleu1,
            exact_match=field_scores.exact_match,
            probe_metadata=dict(probe.metadata) if probe.metadata else None,
        )
        if answerer.judge is not None and probe.category not in EVIDENCE_JUDGED:
            from memory_lab.scoring.judge import (
                record_fields,  # (cognitive: memory-lab judge-cognitive)
            )

            gradings = answerer.judge.grade(
                probe.question, probe.answers, reply, abstention=probe.category == "abstention"
            )
            for name, value in record_fields(gradings).items():  # every (prompt, run) call
                setattr(record, name, value)
        record.seconds = recalled.seconds + time.perf_counter() - started
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
    with quiet_classic_deprecations():
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


def in_threads(job: Callable[[int, int], Any], count: int, width: int) -> Iterator[Any]:
    """``job(thread, i)`` for each i in ``range(count)`` on ``width`` daemon threads.

    Yields the results in order of i, each once it and those before it are done; an error is
    raised in its turn. Daemon threads: a provider call that hangs cannot hold up a stopping run.
    """
    results: dict[int, tuple[bool, Any]] = {}
    done = threading.Condition()
    claimed = iter(range(count))

    def work(thread: int) -> None:
        while True:
            with done:
                i = next(claimed, None)
            if i is None:
                return
            try:
                outcome = (True, job(thread, i))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, in order
                outcome = (False, exc)
            with done:
                results[i] = outcome
                done.notify_all()

    for thread in range(width):
        name = f"memory-lab-probe-{thread}"
        threading.Thread(target=work, args=(thread,), name=name, daemon=True).start()
    for i in range(count):
        with done:
            while i not in results:
                done.wait(0.5)
            ok, value = results.pop(i)
        if not ok:
            raise value
        yield value
