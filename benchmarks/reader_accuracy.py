"""The offline reader's own accuracy: how often it answers when the answer is in its prompt.

For every probe of a dialogue source this builds the prompt the runner builds for the ``buffer``
memory (every exchange up to the probe's ``after`` turn, saved through LangChain's
``ConversationBufferMemory`` and rendered with the shared template), calls the reader directly
and scores the reply with ``score_probe``. Per language it prints:

- ``n``: probes; ``hit``: answerable, non-derived probes whose answer is in the prompt;
- ``acc|hit``: reader accuracy on those (the instrument's own limit);
- ``abst acc``: abstention probes answered with an abstention; ``abst rate``: share of the
  answerable hit probes the reader abstained on (so abstaining everywhere shows);
- ``ms/probe``: reader time per probe;
- with ``--ranks``: where the reader's ranking puts the first sentence that holds an accepted
  answer (among hit probes): first, in the top 3, in the top 10. ``top1`` against ``acc|hit``
  tells whether the instrument's limit is finding the sentence or deciding to answer.

Usage::

    HF_HUB_OFFLINE=1 python benchmarks/reader_accuracy.py builtin:classic benchmarks/reader_dev \
        benchmarks/reader_dev2
    HF_HUB_OFFLINE=1 python benchmarks/reader_accuracy.py locomo:/tmp/locomo10.json --samples 1-2
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from memory_lab.dialogue.model import Dialogue, parse_documents  # noqa: E402
from memory_lab.dialogue.sources import load_dialogues  # noqa: E402
from memory_lab.models import OfflineReader  # noqa: E402
from memory_lab.models.embeddings import OfflineEmbeddings  # noqa: E402
from memory_lab.models.prompt import INPUT_KEY, OUTPUT_KEY, render_prompt, split_prompt  # noqa: E402
from memory_lab.run.bridge import quiet_classic_deprecations  # noqa: E402
from memory_lab.run.exchanges import exchanges  # noqa: E402
from memory_lab.scoring.probes import score_probe  # noqa: E402
from memory_lab.text.normalize import find_any  # noqa: E402


def parse_samples(text: str | None) -> set[int] | None:
    """'1-2,5' -> {1, 2, 5} (1-based sample numbers); None keeps every sample."""
    if not text:
        return None
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def load_source(source: str, samples: set[int] | None) -> list[Dialogue]:
    if source.startswith("locomo:"):
        from memory_lab.dialogue.importers import import_source

        result = import_source("locomo", source[len("locomo:") :])
        dialogues, problems = parse_documents(result.documents, source)
        if problems:
            raise SystemExit("\n".join(map(str, problems)))
    else:
        dialogues = load_dialogues(source)
    if samples is not None:
        dialogues = [d for i, d in enumerate(dialogues, 1) if i in samples]
    return dialogues


def buffer_prompts(dialogue: Dialogue, timestamps: bool = True):
    """(probe, prompt, memory context) for every probe, as the runner builds them for buffer."""
    from langchain_classic.memory import ConversationBufferMemory

    with quiet_classic_deprecations():
        memory = ConversationBufferMemory(
            memory_key="history", input_key=INPUT_KEY, return_messages=False
        )
        exs = exchanges(dialogue)
        where = {tid: ex.index for ex in exs for tid in ex.turn_ids}
        due: dict[int, list] = defaultdict(list)
        for probe in dialogue.probes:
            due[where[probe.after]].append(probe)
        for ex in exs:
            user = ex.dated_user() if timestamps else ex.user
            memory.save_context({INPUT_KEY: user}, {OUTPUT_KEY: ex.assistant})
            if ex.index in due:
                context = memory.load_memory_variables({})["history"]
                for probe in due[ex.index]:
                    yield probe, render_prompt(context, probe.question), context


def answer_rank(reader: OfflineReader, prompt: str, answers: list[str]) -> int | None:
    """1-based position, in the reader's ranking, of the first sentence holding an answer."""
    memory, question = split_prompt(prompt)
    index, score, _ = reader.scores(memory, question)
    order = np.lexsort((np.arange(len(score)), -score))
    for position, i in enumerate(order, 1):
        if find_any(index.sentences[int(i)], answers) is not None:
            return position
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", help="builtin:NAME, a folder/file, locomo:PATH")
    parser.add_argument("--samples", help="which dialogues of each source, 1-based: 1-2 or 3-10")
    parser.add_argument("--misses", type=int, default=0, help="print this many misses")
    parser.add_argument("--categories", action="store_true", help="accuracy per category too")
    parser.add_argument(
        "--ranks", action="store_true", help="rank of the answer's sentence in the reader's order"
    )
    parser.add_argument(
        "--timestamps", choices=["on", "off"], default="on", help="as memory-lab run --timestamps"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a reader parameter for this measurement (tune on a dev split only), repeatable",
    )
    args = parser.parse_args(argv)

    params = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or name not in OfflineReader.model_fields:
            parser.error(f"--set {item!r}: expected NAME=VALUE with a reader parameter name")
        default = OfflineReader.model_fields[name].default
        if isinstance(default, bool):
            params[name] = value.lower() in ("1", "true", "yes", "on")
        elif isinstance(default, int | float | str):
            params[name] = type(default)(value)
        else:
            parser.error(f"--set {item!r}: {name} is not a number, a flag or a text")
    reader = OfflineReader(embeddings=OfflineEmbeddings(), **params)
    print("reader:", reader._identifying_params)
    for source in args.sources:
        stats: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        misses = []
        for dialogue in load_source(source, parse_samples(args.samples)):
            lang = dialogue.language
            for probe, prompt, context in buffer_prompts(dialogue, args.timestamps == "on"):
                started = time.perf_counter()
                reply = reader.answer(prompt)
                elapsed = time.perf_counter() - started
                score = score_probe(probe, reply, context)
                s = stats[lang]
                s["n"] += 1
                s["seconds"] += elapsed
                if probe.category == "abstention":
                    s["abst_n"] += 1
                    s["abst_ok"] += score.correct
                elif score.context_hit and not probe.derived:
                    s["hit"] += 1
                    s["hit_ok"] += score.correct
                    s["hit_abstained"] += score.abstained
                    s[f"cat:{probe.category}:n"] += 1
                    s[f"cat:{probe.category}:ok"] += score.correct
                    if not score.correct:
                        misses.append((dialogue.id, probe, reply))
                    if args.ranks:
                        rank = answer_rank(reader, prompt, list(probe.answers))
                        for top in (1, 3, 10):
                            s[f"top{top}"] += rank is not None and rank <= top
        print(f"\n{source}" + (f" (samples {args.samples})" if args.samples else ""))
        print(
            f"{'lang':5} {'n':>5} {'hit':>5} {'acc|hit':>8} {'abst n':>7} {'abst acc':>9}"
            f" {'abst rate':>10} {'ms/probe':>9}"
            + (f" {'top1':>6} {'top3':>6} {'top10':>6}" if args.ranks else "")
        )
        for lang, s in sorted(stats.items()):
            hit, abst = s["hit"], s["abst_n"]
            acc = f"{s['hit_ok'] / hit:8.1%}" if hit else f"{'-':>8}"
            abst_acc = f"{s['abst_ok'] / abst:9.1%}" if abst else f"{'-':>9}"
            rate = f"{s['hit_abstained'] / hit:10.1%}" if hit else f"{'-':>10}"
            ms = 1000 * s["seconds"] / max(1, s["n"])
            print(
                f"{lang:5} {int(s['n']):5d} {int(hit):5d} {acc} {int(abst):7d} {abst_acc}"
                f" {rate} {ms:9.1f}"
                + (
                    "".join(f" {s[f'top{t}'] / hit:6.1%}" for t in (1, 3, 10))
                    if args.ranks and hit
                    else ""
                )
            )
            if args.categories:
                cats = sorted({k.split(":")[1] for k in s if k.startswith("cat:")})
                for cat in cats:
                    n, ok = s[f"cat:{cat}:n"], s[f"cat:{cat}:ok"]
                    print(f"      {cat:14} {int(n):4d} {ok / n:7.1%}")
        for did, probe, reply in misses[: args.misses]:
            print(f"- [{did} {probe.id} {probe.category}] Q: {probe.question}")
            print(f"    want: {list(probe.answers)}  got: {reply[:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
