"""The conversation prompt every memory is measured with, in one of two answer styles.

``conversation`` (the default, ``TEMPLATE``) is LangChain's own ``ConversationChain`` default
template, so results match what users of the classic chain get. ``short`` (``SHORT_TEMPLATE``,
``--answer-style short``) asks for the answer as a short phrase in the context's own words, as
LoCoMo's and Mem0's evaluations ask their answering models (token F1 and BLEU-1 punish long
replies). Both lay out the memory and the input with the same markers, by which the offline
reader locates the memory section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_lab.errors import ConfigError

if TYPE_CHECKING:
    from langchain_core.prompts import PromptTemplate

MEMORY_KEY = "history"
INPUT_KEY = "input"
OUTPUT_KEY = "response"

MEMORY_HEADER = "Current conversation:\n"
INPUT_PREFIX = "\nHuman: "
REPLY_PREFIX = "\nAI:"

TEMPLATE = (
    "The following is a friendly conversation between a human and an AI. The AI is talkative "
    "and provides lots of specific details from its context. If the AI does not know the answer "
    "to a question, it truthfully says it does not know.\n\n"
    f"{MEMORY_HEADER}{{{MEMORY_KEY}}}{INPUT_PREFIX}{{{INPUT_KEY}}}{REPLY_PREFIX}"
)

SHORT_TEMPLATE = (
    "The following is a conversation between a human and an AI. The AI answers the human's "
    "question from its context in the form of a short phrase, using exact words from the "
    "context whenever possible, with no explanation. If the AI does not know the answer to a "
    "question, it truthfully says it does not know.\n\n"
    f"{MEMORY_HEADER}{{{MEMORY_KEY}}}{INPUT_PREFIX}{{{INPUT_KEY}}}{REPLY_PREFIX}"
)

TEMPLATES = {"conversation": TEMPLATE, "short": SHORT_TEMPLATE}  # keys: config.ANSWER_STYLES


def answer_prompt(style: str = "conversation") -> PromptTemplate:
    """The answering prompt of an answer style (``conversation`` or ``short``)."""
    if style not in TEMPLATES:
        raise ConfigError(f"answer style must be one of {', '.join(TEMPLATES)}, got {style!r}")
    from langchain_core.prompts import PromptTemplate  # LangChain loads with the first prompt

    return PromptTemplate(input_variables=[MEMORY_KEY, INPUT_KEY], template=TEMPLATES[style])


def render_prompt(history: str, user_input: str, style: str = "conversation") -> str:
    """The exact text the chat model receives for this memory context and input."""
    return answer_prompt(style).format(**{MEMORY_KEY: history, INPUT_KEY: user_input})


def split_prompt(prompt: str) -> tuple[str, str]:
    """Split a rendered prompt into (memory section, user input).

    Raises ValueError for a prompt not laid out by this template, so a mismatch is loud.
    """
    start = prompt.find(MEMORY_HEADER)
    cut = prompt.rfind(INPUT_PREFIX)
    if start == -1 or cut == -1 or cut < start:
        raise ConfigError(
            "prompt does not follow the memory-lab conversation template "
            f"(expected {MEMORY_HEADER.strip()!r} ... {INPUT_PREFIX.strip()!r})"
        )
    memory = prompt[start + len(MEMORY_HEADER) : cut]
    question = prompt[cut + len(INPUT_PREFIX) :]
    if question.endswith(REPLY_PREFIX):
        question = question[: -len(REPLY_PREFIX)]
    return memory, question.strip()
