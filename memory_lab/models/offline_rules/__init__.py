"""Rule scripts of the offline memory model for the memory systems it recognises.

A memory calls its model as it would any provider's; the offline memory model looks at what it
is asked (the tools bound, the prompt) and, when it recognises a memory system's request,
answers with that system's script: MemGPT's tools (``memgpt``), LangMem's manager through
trustcall (``langmem``), mem0's extraction prompt (``mem0``), Graphiti's structured calls by
their response schema (``graphiti``), Hindsight's and Cognee's likewise (``hindsight``,
``cognee``). ``RuleScript``
(``base``) is their shared shape;
``facts`` what they count as a fact about the user.
"""

from __future__ import annotations

from memory_lab.models.offline_rules.base import (
    DONE_REPLY,
    Request,
    RuleScript,
    RuleSettings,
    numbered,
)
from memory_lab.models.offline_rules.cognee import CogneeScript
from memory_lab.models.offline_rules.graphiti import GraphitiScript
from memory_lab.models.offline_rules.hindsight import HindsightScript
from memory_lab.models.offline_rules.langmem import LangMemScript
from memory_lab.models.offline_rules.mem0 import Mem0Script
from memory_lab.models.offline_rules.memgpt import MemGPTScript

__all__ = [
    "DONE_REPLY",
    "SCRIPTS",
    "Request",
    "RuleScript",
    "RuleSettings",
    "numbered",
    "recognised",
]

SCRIPTS: tuple[RuleScript, ...] = (
    MemGPTScript(),
    LangMemScript(),
    Mem0Script(),
    GraphitiScript(),
    HindsightScript(),
    CogneeScript(),
)


def recognised(request: Request) -> RuleScript | None:
    """The script of the memory system making ``request``, or None."""
    return next((script for script in SCRIPTS if script.recognises(request)), None)
