"""A-Mem: its authors' ``AgenticMemorySystem`` (``agentic_memory``), ``adapter.py``; ``rules.py``
offline. No package index carries the authors' code: it installs from their repository."""

from memory_lab.memories.system import System

SYSTEM = System(
    name="amem",
    title="A-Mem",
    upstream="agentic-memory",
    version="0.0.1 (agiresearch/A-mem at ceffb86)",
    licence="MIT",
    reference="https://github.com/agiresearch/A-mem (Xu et al., arXiv:2502.12110)",
    adapter="memory_lab.memories.systems.amem.adapter",
    memories=("amem",),
    requires=("agentic_memory", "litellm", "rank_bm25"),
    extra="amem",
    install=(
        "pip install 'memory-lab[amem]' "
        "'agentic-memory @ git+https://github.com/agiresearch/A-mem@ceffb86'"
    ),
    # litellm (which A-Mem imports) fetches its model-price map from GitHub at import otherwise
    telemetry={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    rules="memory_lab.memories.systems.amem.rules:AMemScript",
    docs="memories/amem.md",
)
