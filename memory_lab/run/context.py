"""A run's whole context (``RunModels``): its configuration and the live parts its cells share."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from memory_lab.log.config import RunConfig
from memory_lab.log.run_spec import RunSpec
from memory_lab.models import READER_RETRIEVAL_MODEL, is_offline, resolve_chat_model
from memory_lab.models.accounting import Meter, MeterCallback
from memory_lab.models.embeddings import (
    OfflineEmbeddings,
    limit_torch_threads,
    offline_embedding_model,
)
from memory_lab.models.providers import (
    MeteredEmbeddings,
    provider_embeddings,
    use_client_settings,
)
from memory_lab.models.tokens import count_tokens
from memory_lab.text.redact import remember_resources

_STARTUP_LOCK = threading.Lock()


@dataclass
class RunModels:
    """A run's whole context, shared by every cell it runs: its configuration (``config``) and
    its live, run-wide parts: the embeddings (the offline models with their caches, or a
    provider's, metered), the chat models through the call cache, the judge, and the gate on
    probe requests in flight.

    ``resources`` are the run-wide named resources (``--resource NAME=VALUE``): handed to
    memories, never written to any file. ``work_dir`` is the results folder (memories that
    keep files get a folder per cell under it). ``create`` builds one from a configuration,
    ``for_spec`` from a run's ``RunSpec``.
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
    warmed: bool = False  # ``warm_once`` has loaded this process's engines

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
        """Build the run-wide parts for ``config`` with ``settings`` (``RunConfig.given``).

        The resources' and base URL's secrets are masked in this process's errors from here on
        (each worker process builds its models, so learns them too).
        """
        config = RunConfig.given(config, settings)
        remember_resources(resources, config.base_url)
        call_cache = None
        if cache_dir is not None:
            from memory_lab.models.cache import CallCache

            call_cache = CallCache(cache_dir)
        provider = None
        store = None
        if cache_dir is not None:  # offline vectors are kept beside the model calls
            from memory_lab.models.cache import offline_embedding_store

            store = offline_embedding_store(cache_dir)
        offline_key = offline_embedding_model(config.embeddings)
        device = config.device
        memory_offline = (
            OfflineEmbeddings(model=offline_key, store=store, device=device)
            if offline_key
            else None
        )
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
            reader_retrieval = OfflineEmbeddings(
                model=READER_RETRIEVAL_MODEL, store=store, device=device
            )
        return cls(
            config=config,
            embeddings=OfflineEmbeddings(store=store, device=device),  # the offline reader's
            memory_offline_embeddings=memory_offline,
            reader_retrieval=reader_retrieval,
            provider_embeddings=provider,
            call_cache=call_cache,
            cache_dir=cache_dir,
            resources=dict(resources or {}),
            work_dir=work_dir,
        )

    @classmethod
    def for_spec(cls, spec: RunSpec, threads: int | None = None) -> RunModels:
        """The context of the run ``spec`` describes, in its folder.

        ``threads``: in a worker process or Ray task, at most that many torch threads (jobs x
        threads stays within the machine's cores), and this process's provider clients get the
        run's timeout and retries (the driver sets those around the whole run itself).
        """
        if threads is not None:
            use_client_settings(spec.client)
            limit_torch_threads(threads)
        return cls.create(
            spec.effective,
            cache_dir=spec.cache_dir,
            resources=spec.resource_values,
            work_dir=str(Path(spec.folder).resolve()) if spec.folder else None,
        )

    def warm(self) -> float:
        """Load, before any cell, what this run's cells would load on first use: the tokenizer,
        the offline reader's engines (MiniLM, e5) and the memories' offline embedding engine.
        Returns the seconds it took: the process's startup, which no cell is charged with (the
        first memory to run was charged with it, 34 s against 1-3 s for the others)."""
        started = time.perf_counter()
        count_tokens("warm")
        engines = [self.memory_offline_embeddings]
        if is_offline(self.config.llm):
            engines += [self.embeddings, self.reader_retrieval]
        for engine in engines:
            if engine is not None:
                engine.load()
        return time.perf_counter() - started

    def warm_once(self) -> float | None:
        """``warm`` the first time a cell of this process asks (a driver whose cells run in
        workers loads nothing), returning its seconds, the process's startup; None after that.
        The first cell of a process records it (``CellRecord.startup_seconds``), apart from its
        own seconds; a cell in another thread waits here until the engines are loaded."""
        with _STARTUP_LOCK:
            if self.warmed:
                return None
            self.warmed = True
            return self.warm()

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
        from memory_lab.scoring.judge import judge_templates
        from memory_lab.scoring.judge_panel import build_panel

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
