"""Look inside one memory at one turn: the context it would put into the prompt, and its cost.

``inspect_memory`` replays a dialogue through a fresh memory with the run's own ``Cell`` (the
same replay, prompt and meters as a benchmark run) and stops at the requested turn.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path

from memory_lab.dialogue.model import Dialogue
from memory_lab.dialogue.sources import builtin_suites, load_dialogues
from memory_lab.errors import BadInput
from memory_lab.memories.protocol import Exchange
from memory_lab.memories.registry import MemorySpec, parse_memory_spec
from memory_lab.models.prompt import INPUT_KEY
from memory_lab.models.tokens import count_tokens
from memory_lab.run.cell import open_cell, replayed
from memory_lab.run.context import RunModels
from memory_lab.run.exchanges import exchanges

# Lines that start a new part of a context: a buffered exchange, a retrieved vector snippet
# (``input: ...`` / ``response: ...`` documents), the summary of a summary-buffer memory, or the
# heading of a combined memory's part (``## window``).
_PART_STARTS = ("Human: ", f"{INPUT_KEY}: ", "System: ", "## ")


@dataclass(frozen=True)
class MemoryView:
    """What one memory puts into the prompt at one point of a dialogue."""

    memory: str
    dialogue: str
    turn_id: str
    exchange: int
    user_input: str
    query: str | None
    context: str
    context_tokens: int
    prompt: str
    prompt_tokens: int
    memory_tokens: int
    summary: str | None
    parts: tuple[str, ...]
    snapshot: dict

    @property
    def moment(self) -> str:
        """When the view is taken, in words."""
        if self.query is None:
            return f"before exchange {self.exchange} (with turn {self.turn_id}) is saved"
        return f"after exchange {self.exchange} (with turn {self.turn_id}) is saved"

    def to_text(self, show_prompt: bool = False) -> str:
        """A plain-text rendering for terminals; ``show_prompt`` appends the full prompt."""
        asked = "query" if self.query is not None else "user input"
        lines = [
            f"memory {self.memory} | dialogue {self.dialogue} | {self.moment}",
            f"{asked}: {self.user_input}",
            f"context: {self.context_tokens} tokens | prompt: {self.prompt_tokens} tokens | "
            f"memory maintenance so far: {self.memory_tokens} tokens",
        ]
        if self.summary is not None:
            lines += ["", "summary:", _indent(self.summary or "(empty)")]
        lines += ["", f"memory context ({len(self.parts)} part(s)):"]
        if not self.parts:
            lines.append("    (empty)")
        for i, part in enumerate(self.parts, 1):
            lines.append(f"  [{i}] " + _indent(part, 6).lstrip())
        if show_prompt:
            lines += ["", "prompt:", self.prompt]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        e = html.escape
        asked = "query" if self.query is not None else "user input"
        summary = (
            f"<p><b>summary:</b></p><pre style='white-space:pre-wrap'>{e(self.summary)}</pre>"
            if self.summary is not None
            else ""
        )
        parts = "".join(
            f"<li><pre style='white-space:pre-wrap;margin:0'>{e(p)}</pre></li>" for p in self.parts
        )
        return (
            f"<div><p><b>{e(self.memory)}</b> &middot; dialogue {e(self.dialogue)} &middot; "
            f"{e(self.moment)}</p>"
            f"<p><b>{asked}:</b> {e(self.user_input)}</p>"
            f"<p>context {self.context_tokens} tokens &middot; prompt {self.prompt_tokens} tokens "
            f"&middot; memory maintenance so far {self.memory_tokens} tokens</p>"
            f"{summary}<p><b>memory context</b> ({len(self.parts)} part(s)):</p>"
            f"<ol>{parts}</ol></div>"
        )


def _indent(text: str, width: int = 4) -> str:
    pad = " " * width
    return "\n".join(pad + line for line in text.splitlines())


def split_context(context: str, summary: str | None = None) -> tuple[str, ...]:
    """Split a context into its summary, exchanges or retrieved snippets (else into lines)."""
    if summary and summary in context:
        end = context.index(summary) + len(summary)
        return (context[:end].strip(), *split_context(context[end:]))
    lines = context.splitlines()
    if not any(line.startswith(_PART_STARTS) for line in lines):
        return tuple(line for line in lines if line.strip())
    parts: list[list[str]] = []
    for line in lines:
        if line.startswith(_PART_STARTS) or not parts:
            parts.append([line])
        else:
            parts[-1].append(line)
    return tuple("\n".join(p) for p in parts if "".join(p).strip())


def resolve_dialogue(dialogue: Dialogue | str | Path) -> Dialogue:
    """A Dialogue as is, a file holding one dialogue, or a built-in dialogue id."""
    if isinstance(dialogue, Dialogue):
        return dialogue
    text = str(dialogue)
    if Path(text).is_file():
        found = load_dialogues(text)
        if len(found) != 1:
            ids = ", ".join(d.id for d in found)
            raise BadInput(f"{text} holds {len(found)} dialogues ({ids}); pass one Dialogue")
        return found[0]
    builtin = load_dialogues(*(f"builtin:{s}" for s in builtin_suites()))
    for d in builtin:
        if d.id == text:
            return d
    known = ", ".join(d.id for d in builtin)
    raise BadInput(f"no dialogue file or built-in dialogue {text!r} (built-in: {known})")


def _find_exchange(dialogue: Dialogue, at_turn: str) -> Exchange:
    exs = exchanges(dialogue)
    for ex in exs:
        if at_turn in ex.turn_ids:
            return ex
    ids = [t.id for t in dialogue.turns]
    close = get_close_matches(at_turn, ids, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    few = ", ".join(ids[:5]) + (f", ..., {ids[-1]}" if len(ids) > 5 else "")
    raise BadInput(
        f"dialogue '{dialogue.id}' has no turn {at_turn!r}{hint}; "
        f"its {len(ids)} turn ids include {few}"
    )


def inspect_memory(
    memory_spec: str | MemorySpec,
    dialogue: Dialogue | str,
    at_turn: str,
    *,
    models: RunModels | None = None,
    query: str | None = None,
) -> MemoryView:
    """Replay ``dialogue`` through a fresh memory and show its prompt context at ``at_turn``.

    ``at_turn`` names any turn; the view is taken at the exchange holding it (a user turn and
    the assistant replies after it). Without ``query`` it is the prompt the model receives for
    that exchange's user input, with every earlier exchange saved and this one not yet saved -
    exactly the prompt a benchmark run records for that turn. With ``query`` the exchange is
    saved too and the view is the prompt for ``query``, as for a probe with ``after: at_turn``
    (read-only: the query is not saved). ``memory_tokens`` is the memory's own LLM and embedding
    tokens spent on every saved exchange plus on loading this context. ``dialogue`` may be a
    Dialogue, a dialogue file or a built-in dialogue id; an unknown turn id raises ValueError.
    """
    spec = parse_memory_spec(memory_spec) if isinstance(memory_spec, str) else memory_spec
    dialogue = resolve_dialogue(dialogue)
    target = _find_exchange(dialogue, at_turn)
    models = models or RunModels.create(record_prompts=False)
    with open_cell(spec, dialogue, models) as cell:
        saved = replayed(cell, target.index + (query is not None))
        spent = sum(records[0].memory_tokens for _, records in saved)
        user_input = target.user if query is None else query
        turn = cell.prompt_for(user_input, target)  # the run's prompt
        spent += cell.maintenance()[0].total
        snapshot = cell.snapshot()
        summary = snapshot.get("summary")
    context, prompt = turn.context, turn.text
    return MemoryView(
        memory=spec.label,
        dialogue=dialogue.id,
        turn_id=at_turn,
        exchange=target.index,
        user_input=user_input,
        query=query,
        context=context,
        context_tokens=count_tokens(context),
        prompt=prompt,
        prompt_tokens=count_tokens(prompt),
        memory_tokens=spent,
        summary=summary,
        parts=split_context(context, summary),
        snapshot=snapshot,
    )
