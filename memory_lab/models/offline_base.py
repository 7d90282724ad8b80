"""The shared shape of the offline chat models: text in, text out, usage from our tokenizer."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from memory_lab.models.tokens import count_tokens, token_ids


class OfflineChatModel(BaseChatModel):
    """A deterministic chat model: subclasses implement ``respond(prompt) -> reply``.

    Replies carry ``usage_metadata`` counted with the bundled tokenizer, and LangChain's own
    token counting uses it too, so nothing ever downloads a tokenizer.
    """

    custom_get_token_ids: Any = Field(default=token_ids, exclude=True)

    def respond(self, prompt: str) -> str:
        """The reply to the whole prompt text."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        return chat_result(prompt, self.respond(prompt))


def chat_result(prompt: str, reply: str, billed: str | None = None, **message: Any) -> ChatResult:
    """A one-message result whose usage is counted with our tokenizer.

    ``billed`` is the output text to count when it differs from ``reply`` (tool calls).
    """
    usage = {"input_tokens": count_tokens(prompt), "output_tokens": count_tokens(billed or reply)}
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    ai = AIMessage(content=reply, usage_metadata=usage, **message)
    return ChatResult(generations=[ChatGeneration(message=ai)])
