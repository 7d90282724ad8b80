"""The offline reader's cost per call as a buffer's context grows (issue 47).

Replays one dialogue (a ``load_dialogues`` source holding one, e.g.
``beam:BEAM/chats#scale=100K,conversations=1``) through a memory (default ``buffer``) and keeps
the exact prompt of every exchange and probe (``Cell.prompt_for``: what a live reader would be
sent at each exchange), then has the reader answer them all in order, twice: a first pass that
embeds every sentence and word (cached by text), then a timed pass with a fresh reader over the
same, warm caches, which is what the reader itself costs per call. Prints the median
milliseconds per call in four bands of context length. ``--context-limit TOKENS`` cuts the
oldest memory text as a run does past the reader's window. ``--baseline FILE`` times another
copy of the reader module as well (e.g. ``git show HEAD:memory_lab/models/offline_reader.py >
/tmp/reader_old.py``) and checks that both give the same reply to every prompt.

    python benchmarks/reader_context.py "beam:BEAM/chats#scale=100K,conversations=1"
    python benchmarks/reader_context.py SOURCE --context-limit 30000 --baseline /tmp/reader_old.py
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def prompts_of(source: str, memory: str, models) -> list[str]:
    """Every prompt ``Cell.prompt_for`` builds replaying ``source`` through ``memory``."""
    from memory_lab import load_dialogues, parse_memory_spec, replay_dialogue
    from memory_lab.models import offline_reader
    from memory_lab.run import cell

    dialogues = load_dialogues(source)
    if len(dialogues) != 1:
        raise SystemExit(f"{source} holds {len(dialogues)} dialogues: select one")
    captured: list[str] = []
    prompt_for, answer = cell.Cell.prompt_for, offline_reader.OfflineReader.answer

    def capture(self, text, ex):
        turn = prompt_for(self, text, ex)
        captured.append(turn.text)
        return turn

    cell.Cell.prompt_for = capture
    offline_reader.OfflineReader.answer = lambda self, prompt: offline_reader.ABSTAIN_REPLY
    try:
        replay_dialogue(parse_memory_spec(memory), dialogues[0], models, lambda record: None)
    finally:
        cell.Cell.prompt_for, offline_reader.OfflineReader.answer = prompt_for, answer
    return captured


def timed(module, prompts: list[str], models) -> tuple[list[str], list[float]]:
    emb, ret = models.shared_embeddings(), models.reader_retrieval
    reader = module.OfflineReader(embeddings=emb.view(None), retrieval=ret.view(None))
    replies, seconds = [], []
    for prompt in prompts:
        started = time.perf_counter()
        replies.append(reader.answer(prompt))
        seconds.append(time.perf_counter() - started)
    return replies, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("--memory", default="buffer")
    parser.add_argument("--context-limit", type=int)
    parser.add_argument("--baseline", help="another copy of offline_reader.py to compare")
    args = parser.parse_args()
    from memory_lab import RunModels
    from memory_lab.models import offline_reader
    from memory_lab.models.cache import default_cache_dir
    from memory_lab.models.prompt import split_prompt

    settings = {"context_limit": args.context_limit} if args.context_limit else {}
    models = RunModels.create(cache_dir=str(default_cache_dir()), **settings)
    prompts = prompts_of(args.source, args.memory, models)
    readers = {"reader": offline_reader}
    if args.baseline:
        spec = importlib.util.spec_from_file_location("baseline_reader", args.baseline)
        baseline = importlib.util.module_from_spec(spec)
        sys.modules["baseline_reader"] = baseline
        spec.loader.exec_module(baseline)
        readers = {"baseline": baseline, **readers}
    timed(offline_reader, prompts, models)  # embeds every sentence and word once
    sizes = np.array([len(split_prompt(p)[0]) for p in prompts])
    bands = np.array_split(np.argsort(sizes, kind="stable"), 4)
    print(f"{len(prompts)} prompts, memory text up to {sizes.max() / 1000:.0f}K characters")
    got = {}
    for name, module in readers.items():
        replies, seconds = timed(module, prompts, models)
        got[name] = replies
        cells = ", ".join(
            f"{sizes[b].mean() / 1000:.0f}K chars {np.median(np.array(seconds)[b]) * 1000:.1f} ms"
            for b in bands
            if len(b)
        )
        print(f"{name:>8}: {sum(seconds):.2f} s in all; median per call by context: {cells}")
    if args.baseline:
        differ = [i for i, (a, b) in enumerate(zip(*got.values(), strict=True)) if a != b]
        print(f"identical replies: {len(prompts) - len(differ)}/{len(prompts)}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
