"""What a resume of a run may change and what it checks first (``RunSpec.resumed`` applies them).

A resume may be given only ``ResumeOptions``; everything else is as the run's run.json records
it. Before it executes, the dialogues must be unchanged (``check_dialogues``: their content
hashes), the grading prompt files too (``check_judge_prompts``: their SHA-256), this version
must embed the run's offline models with the same engine (``check_embedding_engines``), and
the base URL is the recorded one or the same URL given again (``resume_base_url``: a URL with
credentials is never written).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypedDict

from memory_lab.errors import BadInput, ConfigError
from memory_lab.text.redact import has_redacted_credentials, redact

if TYPE_CHECKING:
    from memory_lab.dialogue.model import Dialogue
    from memory_lab.log.run_spec import RunSpec


class ResumeOptions(TypedDict, total=False):
    """What a resume of a run may be given (``RunSpec.resumed``, ``resume_benchmark``, ``memory-lab
    run --resume``); the rest is as the run's run.json records it. ``jobs``/``concurrency`` and
    the executor (``executor``, ``ray_address``) may change; the ``resources`` must be given
    again (never written), as must a base URL with credentials (``base_url``, else
    ``OPENAI_BASE_URL``: ``resume_base_url``). None, or not given: as recorded.
    ``trust_sources``: import a memory's recorded source even when it is not memory-lab's, an
    installed entry point or the recorded file unchanged (``memories/sources.py``).
    ``rpm``/``tpm``: the provider limits (``--rpm``/``--tpm``) may change too (a new tier)."""

    jobs: int | None
    concurrency: int | None
    executor: str | None
    ray_address: str | None
    resources: dict[str, str] | None
    base_url: str | None
    trust_sources: bool | None
    rpm: float | dict[str, float] | None
    tpm: float | dict[str, float] | None


RESUME_OPTIONS = tuple(ResumeOptions.__annotations__)  # their names, in that order


def resume_options(given: dict[str, Any]) -> ResumeOptions:
    """``given`` as ResumeOptions; TypeError naming any option a resume does not take."""
    unknown = [name for name in given if name not in RESUME_OPTIONS]
    if unknown:
        raise TypeError(f"a resume takes no option {', '.join(map(repr, unknown))}")
    return ResumeOptions(**given)


def check_dialogues(spec: RunSpec, dialogues: list[Dialogue]) -> None:
    """ValueError naming the dialogues whose content changed since the run started."""
    recorded = {d.id: d.sha256 for d in spec.dialogues}
    current = {d.id: d.content_hash for d in dialogues}
    if current != recorded:
        changed = sorted(
            k for k in recorded.keys() | current.keys() if recorded.get(k) != current.get(k)
        )
        raise BadInput(
            f"{spec.folder}: dialogues changed since the run started: {', '.join(changed)}"
        )


def check_embedding_engines(spec: RunSpec, where: str) -> None:
    """ValueError if this version embeds the run's offline models with another engine.

    A run's cells must share one engine: the recorded names (``models.embeddings_model``,
    ``models.reader_embeddings``) are what this version would record for the same settings.
    """
    from memory_lab.models.embeddings import embedding_model_name, offline_embedding_model
    from memory_lab.models.offline_reader import reader_embedding_names

    key = offline_embedding_model(spec.config.embeddings)
    pairs = [(spec.models.embeddings_model, embedding_model_name(key) if key else None)]
    if spec.models.reader_embeddings is not None:
        pairs.append((spec.models.reader_embeddings, reader_embedding_names()))
    for recorded, now in pairs:
        if recorded is not None and now is not None and recorded != now:
            raise BadInput(
                f"{where}: the run embedded with {recorded}; this version embeds the same "
                f"settings with {now}: start a new run (or resume with the version that began it)"
            )


def check_judge_prompts(spec: RunSpec, where: str) -> None:
    """ValueError if a grading prompt file changed since the run started."""
    from memory_lab.scoring.judge import judge_templates

    recorded = [p.sha256 for p in spec.judge.prompts] if spec.judge is not None else []
    config = spec.config
    if config.judge is None or not recorded:
        return
    for template, sha in zip(judge_templates(config.judge_prompts), recorded, strict=False):
        if template.sha256 != sha:
            raise BadInput(f"{where}: judge prompt {template.file} changed since the run started")


def resume_base_url(recorded: str | None, given: str | None, where: str) -> str | None:
    """The base URL a resumed run uses: the recorded one, or the same URL given again.

    run.json records a base URL with its credentials redacted, so such a run resumes only with
    the full URL given again (``given``, else ``OPENAI_BASE_URL``); a URL given that is not the
    recorded one (a different server) is refused, with a one-line ValueError.
    """
    if given is None and has_redacted_credentials(recorded):
        given = os.environ.get("OPENAI_BASE_URL") or None
        if given is None:
            raise ConfigError(
                f"{where}: the run's base URL {recorded} had credentials, which are never "
                "written; pass it again with --base-url URL (or set OPENAI_BASE_URL)"
            )
    if given is None:
        return recorded
    if redact(given, known=False) != redact(recorded or "", known=False):
        raise ConfigError(
            f"{where}: the run used the base URL {recorded or '(none given)'}, not "
            f"{redact(given)}; a resumed run keeps its provider"
        )
    return given
