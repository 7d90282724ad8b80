"""The one conversation prompt every memory is measured with.

It is LangChain's own ``ConversationChain`` default template, so results match what users of the
classic chain get. The offline reader locates the memory section by the same markers.
"""

from __future__ import annotations

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

CONVERSATION_PROMPT = PromptTemplate(input_variables=[MEMORY_KEY, INPUT_KEY], template=TEMPLATE)


def render_prompt(history: str, user_input: str) -> str:
    """The exact text the chat model receives for this memory context and input."""
    return CONVERSATION_PROMPT.format(**{MEMORY_KEY: history, INPUT_KEY: user_input})


def split_prompt(prompt: str) -> tuple[str, str]:
    """Split a rendered prompt into (memory section, user input).

    Raises ValueError for a prompt not laid out by this template, so a mismatch is loud.
    """
    start = prompt.find(MEMORY_HEADER)
    cut = prompt.rfind(INPUT_PREFIX)
    if start == -1 or cut == -1 or cut < start:
        raise ValueError(
            "prompt does not follow the memory-lab conversation template "
            f"(expected {MEMORY_HEADER.strip()!r} ... {INPUT_PREFIX.strip()!r})"
        )
    memory = prompt[start + len(MEMORY_HEADER) : cut]
    question = prompt[cut + len(INPUT_PREFIX) :]
    if question.endswith(REPLY_PREFIX):
        question = question[: -len(REPLY_PREFIX)]
    return memory, question.strip()
