"""``combined``: two or more registered memories side by side, through LangChain's CombinedMemory.

Each part is any registered memory spec, built with its own resources (``for_part``: its own
Chroma collection and folder, its model calls and embeddings metered under its label). The
parts sit in ``CombinedMemory`` as it is, each behind a small LangChain memory with a variable
of its own; every exchange is saved into every part, and the context is each part's recall
under a heading naming the part (``## window``), parts with nothing to show left out.

Spec syntax: ``combined:parts=window+vector``; a part's own parameter is written inline
(``combined:parts=window:k=3+vector:k=6``), and a part with several parameters separates them
with ``/`` (``combined:parts=window+entity:store=sqlite/k=2``), since ``,`` separates the
parameters of ``combined`` itself and ``+`` its parts. So a part cannot take a list value, nor a
text value holding ``+``, ``,`` or ``/``.
"""

from __future__ import annotations

from typing import Any

from langchain_classic.base_memory import BaseMemory

from memory_lab.memories.protocol import (
    Exchange,
    Item,
    Memory,
    MemoryResources,
    Query,
    Recall,
    SessionInfo,
    held_texts,
)
from memory_lab.memories.registry import (
    MemorySpec,
    MemorySpecError,
    ParamDoc,
    build_memory,
    parse_memory_spec,
    register_memory,
)
from memory_lab.models.prompt import INPUT_KEY, OUTPUT_KEY

PART_PARAM_SEPARATOR = "/"
_EXCHANGE, _QUERY = "memory_lab_exchange", "memory_lab_query"


def part_spec(text: str) -> MemorySpec:
    """The memory spec of one part (``entity:store=sqlite/k=2``), checked."""
    spec = parse_memory_spec(text.replace(PART_PARAM_SEPARATOR, ","))
    if spec.name == "combined":
        raise MemorySpecError("memory 'combined': a part cannot itself be combined")
    return spec


def check_parts(parts: list[str]) -> list[str]:
    """Every part a valid, distinct spec, and at least two of them (MemorySpecError otherwise)."""
    if len(parts) < 2:
        raise MemorySpecError(
            f"memory 'combined': parameter 'parts' needs two or more memories joined with '+' "
            f"(e.g. window+vector), got {'+'.join(parts) or 'none'}"
        )
    labels = []
    for text in parts:
        try:
            labels.append(part_spec(text).label)
        except MemorySpecError as exc:
            raise MemorySpecError(f"memory 'combined': part {text!r}: {exc}") from None
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise MemorySpecError(f"memory 'combined': part given twice: {', '.join(twice)}")
    return parts


def part_roles(params: dict[str, Any]) -> tuple[str, ...]:
    """The model roles the parts use, for run.json."""
    roles: list[str] = []
    for text in params.get("parts", []):
        spec = part_spec(text)
        roles += spec.factory.roles_for(spec.params)
    return tuple(dict.fromkeys(roles))


class PartMemory(BaseMemory):
    """One part as ``CombinedMemory`` sees it: a LangChain memory with a variable of its own.

    It hands the exchange (or query) the combined memory passes along in ``inputs`` to the
    part's ``observe`` (or ``recall``); its value is the part's ``Recall``.
    """

    memory: Any
    key: str

    @property
    def memory_variables(self) -> list[str]:
        return [self.key]

    def load_memory_variables(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {self.key: self.memory.recall(inputs[_QUERY])}

    def save_context(self, inputs: dict[str, Any], outputs: dict[str, str]) -> None:
        self.memory.observe(inputs[_EXCHANGE])

    def clear(self) -> None:
        """Parts are released by ``close``."""


class Combined:
    """Registered memories side by side: each part's recall under a heading with its label."""

    def __init__(self, parts: list[tuple[str, Memory]]):
        from langchain_classic.memory import CombinedMemory

        self.labels = [label for label, _ in parts]
        self.parts = [memory for _, memory in parts]
        self.inner = CombinedMemory(
            memories=[PartMemory(memory=m, key=f"part_{i}") for i, m in enumerate(self.parts)]
        )

    def observe(self, exchange: Exchange) -> None:
        self.inner.save_context(
            {INPUT_KEY: exchange.user, _EXCHANGE: exchange}, {OUTPUT_KEY: exchange.assistant}
        )

    def end_session(self, session: SessionInfo) -> None:
        for part in self.parts:
            part.end_session(session)

    def recall(self, query: Query) -> Recall:
        values = self.inner.load_memory_variables({INPUT_KEY: query.text, _QUERY: query})
        items: list[Item] = []
        recalls = [values[f"part_{i}"] for i in range(len(self.labels))]
        for label, recall in zip(self.labels, recalls, strict=True):
            if any(item.text for item in recall.items):
                items += [Item(f"## {label}", (), "other"), *recall.items]
        # one part's ranking is the whole's; two ranking parts have no one order between them
        rankings = [r.ranking for r in recalls if r.ranking is not None]
        return Recall(tuple(items), ranking=rankings[0] if len(rankings) == 1 else None)

    def snapshot(self) -> dict[str, Any]:
        return {
            "class": type(self.inner).__name__,
            "parts": {
                label: part.snapshot() for label, part in zip(self.labels, self.parts, strict=True)
            },
        }

    def held_texts(self) -> list[str]:
        """Every part's texts, part after part (a text two parts hold counts twice)."""
        return [text for part in self.parts for text in held_texts(part)]

    def close(self) -> None:
        for part in self.parts:
            part.close()


@register_memory(
    "combined",
    "Two or more registered memories side by side, each part's context under a heading "
    "with its label (CombinedMemory).",
    {
        "parts": ParamDoc(
            "memory specs joined with '+'; a part's parameters separated by '/' "
            "(window:k=3+entity:store=sqlite/k=2)",
            check=check_parts,
        )
    },
    roles_of=part_roles,
)
def combined(res: MemoryResources, parts: list[str] = ["window", "vector"]) -> Combined:  # noqa: B006 - read, never mutated
    built = []
    for text in check_parts(parts):
        spec = part_spec(text)
        factory = spec.factory
        part_res = res.for_part(spec.label, factory.roles_for(spec.params))
        built.append((spec.label, build_memory(spec, part_res)))
    return Combined(built)
