"""Replay one dialogue through one memory (DESIGN.md section 4) and emit records as they happen.

Every cell gets a fresh memory and one ``ConversationChain`` with the shared prompt. User turns are
teacher-forced: the runner records the prompt the chat model *would* receive, then saves the
scripted exchange into the memory; whatever the memory's own LLM or embeddings do while saving is
metered and charged to that turn. Probes go through the same chain with the memory wrapped in
``ReadOnlySharedMemory``, so asking never changes what is remembered.
"""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_classic.base_memory import BaseMemory
from langchain_core._api import LangChainDeprecationWarning
from langchain_core.embeddings import Embeddings

from memory_lab.accounting import Meter, MeterCallback, Usage
from memory_lab.dialogue import Dialogue, Turn
from memory_lab.memories.registry import BuildContext, MemorySpec, build_memory
from memory_lab.models import resolve_chat_model
from memory_lab.models.embeddings import OfflineEmbeddings
from memory_lab.models.providers import MeteredEmbeddings, provider_embeddings
from memory_lab.models.tokens import count_tokens, encoding, token_ids
from memory_lab.prompt import (
    CONVERSATION_PROMPT,
    INPUT_KEY,
    MEMORY_KEY,
    OUTPUT_KEY,
    render_prompt,
    split_prompt,
)
from memory_lab.scoring import score_probe

Emit = Callable[[dict[str, Any]], None]
MODES = ("replay", "live")


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


@dataclass(frozen=True)
class Exchange:
    """A user turn and the assistant reply that follows it, saved into memory together."""

    index: int
    user: Turn | None
    assistant: tuple[Turn, ...]

    @property
    def turn_ids(self) -> tuple[str, ...]:
        return tuple(t.id for t in ((self.user,) if self.user else ()) + self.assistant)

    @property
    def user_text(self) -> str:
        return self.user.text if self.user else ""

    @property
    def reply_text(self) -> str:
        return "\n".join(t.text for t in self.assistant)


def exchanges(dialogue: Dialogue) -> list[Exchange]:
    """Group turns into exchanges: each user turn with the assistant turns that follow it."""
    out: list[Exchange] = []
    user: Turn | None = None
    replies: list[Turn] = []
    for turn in dialogue.turns:
        if turn.role == "user":
            if user is not None or replies:
                out.append(Exchange(len(out), user, tuple(replies)))
            user, replies = turn, []
        else:
            replies.append(turn)
    if user is not None or replies:
        out.append(Exchange(len(out), user, tuple(replies)))
    return out


@dataclass(frozen=True)
class RunModels:
    """Model settings and run-wide shared state (the embedding cache)."""

    llm: str = "offline"
    memory_llm: str = "offline"
    embeddings: OfflineEmbeddings | None = None
    record_prompts: bool = True
    context_limit: int | None = None
    mode: str = "replay"
    judge: str | None = None
    cache_dir: str | None = None
    call_cache: Any = None

    def chat_model(self, spec: str, role: str) -> Any:
        """A chat model for a role; real providers go through the on-disk call cache."""
        if role == "judge":
            from memory_lab.judge import resolve_judge

            model = resolve_judge(spec, base_url=self.base_url)
        else:
            model = resolve_chat_model(
                spec, role, embeddings=self.shared_embeddings(), base_url=self.base_url
            )
        if spec != "offline" and self.call_cache is not None:
            from memory_lab.cache import cached_chat_model

            model = cached_chat_model(model, self.call_cache)
        return model

    embeddings_model: str = "offline"
    base_url: str | None = None
    provider_embeddings: MeteredEmbeddings | None = None

    def memory_embeddings(self, on_embed: Callable[[int], None]) -> Embeddings:
        """The embeddings memories use (offline MiniLM or a provider's), metered per cell."""
        if self.embeddings_model == "offline":
            return self.shared_embeddings().view(on_embed)
        if self.provider_embeddings is None:
            raise ValueError("RunModels.provider_embeddings must be set (use RunModels.create())")
        return self.provider_embeddings.view(on_embed)

    def shared_embeddings(self) -> OfflineEmbeddings:
        if self.embeddings is None:
            raise ValueError("RunModels.embeddings must be set (use RunModels.create())")
        return self.embeddings

    @classmethod
    def create(
        cls,
        llm: str = "offline",
        memory_llm: str = "offline",
        embeddings_model: str = "offline",
        base_url: str | None = None,
        **kw: Any,
    ) -> RunModels:
        """Settings plus the run-wide embedding caches (offline always: the reader uses it)."""
        provider = None
        call_cache = None
        cache_dir = kw.get("cache_dir")
        if cache_dir is not None:
            from memory_lab.cache import CallCache

            call_cache = CallCache(cache_dir)
        if embeddings_model != "offline":
            inner = provider_embeddings(embeddings_model, base_url=base_url)
            if cache_dir is not None:
                from memory_lab.cache import cached_embeddings

                inner = cached_embeddings(inner, Path(cache_dir), embeddings_model)
            provider = MeteredEmbeddings(inner)
        return cls(
            llm=llm,
            memory_llm=memory_llm,
            embeddings=OfflineEmbeddings(),
            embeddings_model=embeddings_model,
            base_url=base_url,
            provider_embeddings=provider,
            call_cache=call_cache,
            **kw,
        )


def cell_id_for(spec: MemorySpec, dialogue: Dialogue) -> str:
    """A unique, Chroma-safe collection name: never reused, even across runs."""
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in f"{spec.name}.{dialogue.id}")
    return f"ml-{safe[:200]}-{uuid.uuid4().hex[:12]}"


class ContextLimitedMemory(BaseMemory):
    """A read-only view of a memory whose context is cut to fit a model's context window.

    When template + context + input would exceed ``limit`` tokens, the oldest part of the
    context (its beginning) is dropped, at a line boundary, and ``truncated`` is set, so a long
    buffer behaves as it would against a real model with that window.
    """

    inner: BaseMemory
    limit: int
    truncated: bool = False

    @property
    def memory_variables(self) -> list[str]:
        return [MEMORY_KEY]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        context = self.inner.load_memory_variables(inputs)[MEMORY_KEY]
        if not isinstance(context, str):
            return {MEMORY_KEY: context}
        budget = self.limit - count_tokens(render_prompt("", str(inputs.get(INPUT_KEY, ""))))
        self.truncated = count_tokens(context) > budget
        if self.truncated:
            ids = token_ids(context)
            kept = encoding().decode(ids[len(ids) - max(0, budget) :]) if budget > 0 else ""
            cut = kept.find("\n")
            context = kept[cut + 1 :] if cut != -1 else ""
        return {MEMORY_KEY: context}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        """Read-only: saving goes to the memory itself, never through this view."""

    def clear(self) -> None:
        """Read-only."""


class Cell:
    """One (memory, dialogue) replay with its own memory, chain and meters."""

    def __init__(self, spec: MemorySpec, dialogue: Dialogue, models: RunModels):
        from langchain_classic.chains import ConversationChain
        from langchain_classic.memory import ReadOnlySharedMemory

        self.spec = spec
        self.dialogue = dialogue
        self.models = models
        self.memory_meter = Meter()
        self.answer_meter = Meter()
        self.answer_callback = MeterCallback(self.answer_meter)
        memory_llm = models.chat_model(models.memory_llm, "memory")
        memory_llm.callbacks = [MeterCallback(self.memory_meter)]
        self.ctx = BuildContext(
            memory_llm=memory_llm,
            embeddings=models.memory_embeddings(self.memory_meter.add_embedding),
            cell_id=cell_id_for(spec, dialogue),
        )
        self.memory = build_memory(spec, self.ctx)
        reader = models.chat_model(models.llm, "reader")
        reader.callbacks = [self.answer_callback]
        view: BaseMemory = ReadOnlySharedMemory(memory=self.memory)
        if models.context_limit is not None:
            view = ContextLimitedMemory(inner=view, limit=models.context_limit)
        self.view = view
        self.judge = None
        self.judge_meter = Meter()
        if models.judge:
            self.judge = models.chat_model(models.judge, "judge")
            self.judge.callbacks = [MeterCallback(self.judge_meter)]
        self.chain = ConversationChain(
            llm=reader,
            prompt=CONVERSATION_PROMPT,
            memory=view,
            input_key=INPUT_KEY,
            output_key=OUTPUT_KEY,
        )

    def base_record(self, kind: str) -> dict[str, Any]:
        return {
            "type": kind,
            "memory": self.spec.label,
            "memory_name": self.spec.name,
            "dialogue": self.dialogue.id,
            "language": self.dialogue.language,
        }

    def memory_context(self, user_input: str) -> str:
        """What the memory puts into the prompt for this input, always as a string."""
        value = self.chain.memory.load_memory_variables({INPUT_KEY: user_input})[MEMORY_KEY]
        if not isinstance(value, str):
            raise TypeError(
                f"memory '{self.spec.name}' returned {type(value).__name__} for '{MEMORY_KEY}'; "
                "adapters must return the context as a string"
            )
        return value

    def live_exchange(self, ex: Exchange) -> dict[str, Any]:
        """Live mode: the model answers the user turn and its reply, not the script's, is saved."""
        started = time.perf_counter()
        self.answer_meter.take()
        self.answer_callback.take_prompts()
        reply = str(self.chain.invoke({INPUT_KEY: ex.user_text})[OUTPUT_KEY])
        prompts = self.answer_callback.take_prompts()
        prompt = prompts[-1] if prompts else ""
        answer = self.answer_meter.take()
        counted = count_tokens(prompt)
        record = self.base_record("turn")
        record.update(
            session=ex.user.session_id,
            turn_id=ex.user.id,
            exchange=ex.index,
            prompt_tokens=answer.input_tokens or counted,
            prompt_tokens_counted=counted,
            context_tokens=count_tokens(_memory_section(prompt)),
            completion_tokens=answer.output_tokens or count_tokens(reply),
            truncated=self.truncated(),
            reply=reply,
        )
        if self.models.record_prompts:
            record["prompt"] = prompt
        self.memory.save_context({INPUT_KEY: ex.user_text}, {OUTPUT_KEY: reply})
        usage = self.memory_meter.take()
        record.update(_maintenance(usage), seconds=time.perf_counter() - started)
        return record

    def replay_exchange(self, ex: Exchange) -> dict[str, Any] | None:
        """Record the would-be prompt for the user turn, then save the scripted exchange."""
        if self.models.mode == "live" and ex.user is not None:
            return self.live_exchange(ex)
        started = time.perf_counter()
        record = None
        if ex.user is not None:
            context = self.memory_context(ex.user_text)
            prompt = CONVERSATION_PROMPT.format(**{MEMORY_KEY: context, INPUT_KEY: ex.user_text})
            record = self.base_record("turn")
            record.update(
                session=ex.user.session_id,
                turn_id=ex.user.id,
                exchange=ex.index,
                prompt_tokens=count_tokens(prompt),
                context_tokens=count_tokens(context),
                completion_tokens=count_tokens(ex.reply_text),
                truncated=self.truncated(),
            )
            if self.models.record_prompts:
                record["prompt"] = prompt
        self.memory.save_context({INPUT_KEY: ex.user_text}, {OUTPUT_KEY: ex.reply_text})
        usage = self.memory_meter.take()
        if record is None:  # an exchange with no user turn still costs what saving it cost
            record = self.base_record("turn")
            record.update(
                session=ex.assistant[0].session_id,
                turn_id=ex.assistant[0].id,
                exchange=ex.index,
                prompt_tokens=0,
                context_tokens=0,
                completion_tokens=0,
                truncated=False,
            )
        record.update(_maintenance(usage), seconds=time.perf_counter() - started)
        return record

    def ask(self, probe, ex: Exchange) -> dict[str, Any]:
        """Ask a probe through the chain with the memory read-only, and score the reply."""
        started = time.perf_counter()
        self.memory_meter.take()
        self.answer_meter.take()
        self.answer_callback.take_prompts()
        reply = str(self.chain.invoke({INPUT_KEY: probe.question})[OUTPUT_KEY])
        prompts = self.answer_callback.take_prompts()
        prompt = prompts[-1] if prompts else ""
        answer_usage = self.answer_meter.take()
        memory_usage = self.memory_meter.take()
        context = _memory_section(prompt)
        counted_prompt = count_tokens(prompt)
        score = score_probe(probe, reply, context)
        record = self.base_record("probe")
        record.update(
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
            truncated=self.truncated(),
            memory_tokens=memory_usage.total,
            embedding_tokens=memory_usage.embedding_tokens,
            seconds=time.perf_counter() - started,
            prompt=prompt,
        )
        if self.judge is not None:
            from memory_lab.judge import judge_reply

            self.judge_meter.take()
            verdict = judge_reply(
                self.judge,
                probe.question,
                probe.answers,
                reply,
                abstention=probe.category == "abstention",
            )
            record.update(
                judge_cache_hit=self.judge_meter.take().cache_hits > 0,
                judge_correct=verdict.correct,
                judge_raw=verdict.raw,
                judge_input_tokens=verdict.input_tokens,
                judge_output_tokens=verdict.output_tokens,
            )
        if probe.metadata:
            record["probe_metadata"] = dict(probe.metadata)
        return record

    def truncated(self) -> bool:
        """Whether the last prompt was cut to fit the context limit."""
        return bool(getattr(self.view, "truncated", False))

    def close(self) -> None:
        self.ctx.close()


def _maintenance(usage: Usage) -> dict[str, int]:
    """Memory-maintenance fields of a turn record: what saving the exchange cost."""
    return {
        "memory_llm_calls": usage.llm_calls,
        "memory_cache_hits": usage.cache_hits,
        "memory_input_tokens": usage.input_tokens,
        "memory_output_tokens": usage.output_tokens,
        "embedding_tokens": usage.embedding_tokens,
        "memory_tokens": usage.total,
    }


def _memory_section(prompt: str) -> str:
    try:
        return split_prompt(prompt)[0]
    except ValueError:  # a prompt from another template: search all of it
        return prompt


def replay_dialogue(
    spec: MemorySpec,
    dialogue: Dialogue,
    models: RunModels,
    emit: Emit,
    on_exchange: Callable[[], None] | None = None,
) -> None:
    """Replay ``dialogue`` through a fresh ``spec`` memory, emitting turn and probe records."""
    with quiet_classic_deprecations():
        cell = Cell(spec, dialogue, models)
        try:
            exs = exchanges(dialogue)
            where = {tid: ex for ex in exs for tid in ex.turn_ids}
            due: dict[int, list] = {}
            for probe in dialogue.probes:
                due.setdefault(where[probe.after].index, []).append(probe)
            for ex in exs:
                emit(cell.replay_exchange(ex))
                for probe in due.get(ex.index, ()):
                    emit(cell.ask(probe, ex))
                if on_exchange is not None:
                    on_exchange()
        finally:
            cell.close()
