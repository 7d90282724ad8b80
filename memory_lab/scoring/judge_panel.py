"""The run's judge panel: several grading prompts (``--judge-prompt``, repeated) and several runs
(``--judge-runs N``), one model per (prompt, run).

Run 0 of a prompt is cached exactly as a single judge call always was; run ``i`` > 0 goes
through ``RunKeyedCache`` (a key of its own), so repeated runs are distinct calls that a rerun
of the whole benchmark still finds in the cache. A probe's gradings become its record's judge
fields by ``verdicts.record_fields``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from memory_lab.scoring.judge import JudgeTemplate, OfflineJudge, judge_reply
from memory_lab.scoring.judge_core import judge_models
from memory_lab.scoring.verdicts import Grading


@dataclass
class JudgePanel:
    """The run's judge: for each grading prompt, one model per run."""

    templates: list[JudgeTemplate]
    models: list[list[BaseChatModel]] = field(default_factory=list)

    def grade(
        self, question: str, answers: Sequence[str], reply: str, *, abstention: bool
    ) -> list[Grading]:
        """Every prompt's every run on one reply, prompt by prompt, run by run."""
        return [
            Grading(
                template.label,
                run,
                judge_reply(
                    model, question, answers, reply, abstention=abstention, template=template
                ),
            )
            for template, row in zip(self.templates, self.models, strict=True)
            for run, model in enumerate(row)
        ]


def build_panel(
    spec: str,
    templates: list[JudgeTemplate],
    runs: int,
    *,
    temperature: float = 0.0,
    base_url: str | None = None,
    cache: Any = None,
    callbacks: list[Any] | None = None,
) -> JudgePanel:
    """A panel of ``runs`` models per template, each sending its usage to ``callbacks``
    (``judge_core.judge_models``).

    Offline, every run is the same deterministic judge. A provider's run 0 uses ``cache`` as is
    (the key a single judge call always had); run ``i`` > 0 a ``RunKeyedCache`` of its own, on a
    shallow copy of the same client.
    """
    panel = JudgePanel(templates)
    for template in templates:
        panel.models.append(
            judge_models(
                spec,
                runs,
                base_url=base_url,
                temperature=temperature,
                cache=cache,
                callbacks=callbacks,
                offline=lambda text=template.text: OfflineJudge(prompt_text=text),
            )
        )
    return panel
