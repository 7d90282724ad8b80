"""LoCoMo-Plus against its reference code, run from the user's fetched copy (never vendored).

1. Stitching: for every sample, the reference's ``data/build_conv.py`` loop (``random.choice``
   after ``random.seed(SEED)``, then ``build_context``) against ``locomo-plus:CHECKOUT#seed=SEED``:
   the same host conversation, the same cue and trigger turns with the host's speakers, the cue
   after the same number of host turns, the same cue and trigger dates; and the judge's evidence
   text equal to ``data/unified_input.py``'s ``_cue_dialogue_to_evidence``.
2. Judge: the replies of a memory-lab run on LoCoMo-Plus (``--results``; by default a small
   offline run made here) judged twice through the loopback OpenAI mock
   (``tests/models/openai_mock.py``) answering as a deterministic judge in six output shapes:
   by the reference's ``_judge_one_record`` + ``_compute_summary`` (its ``call_llm`` client) and
   by ``memory_lab.benchmarks.locomo_plus.judge``. The prompts the mock received (ours sends each
   distinct prompt once: a repeat is answered by the run's call cache), the labels, the scores
   and the summaries must agree (|difference| <= 1e-9).

    PYTHONPATH=. python benchmarks/locomo_plus_check.py --checkout /tmp/Locomo-Plus
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory_lab.benchmarks.locomo_plus.importer import LOCOMO_TIME  # noqa: E402
from memory_lab.benchmarks.locomo_plus.judge import CATEGORY  # noqa: E402
from memory_lab.dialogue.importers import import_source  # noqa: E402
from tests.models.openai_mock import OpenAIMock  # noqa: E402

TOLERANCE = 1e-9
_WORD = re.compile(r"[a-z']+")


def _flat(doc: dict) -> list[tuple[str, str]]:
    """(session id, turn id) of a stitched dialogue, in order."""
    return [(s["id"], t["id"]) for s in doc["sessions"] for t in s["turns"]]


def check_stitching(checkout: Path, seed: int) -> int:
    """Problems found comparing every sample's stitching with build_conv.py's."""
    sys.path.insert(0, str(checkout / "data"))
    import build_conv  # the reference, from the user's copy
    import unified_input

    plus = json.loads((checkout / "data" / "locomo_plus.json").read_text("utf-8"))
    raw = json.loads((checkout / "data" / "locomo10.json").read_text("utf-8"))
    docs = import_source("locomo-plus", checkout, {"seed": str(seed)}).documents
    random.seed(seed)
    problems = 0
    for i, (item, doc) in enumerate(zip(plus, docs, strict=True)):
        host = random.choice(raw)  # build_conv.py's __main__ loop
        ctx = build_conv.build_context(item, host)
        probe = doc["probes"][0]
        meta = probe["metadata"]
        turns = _flat(doc)
        cue_at = next(k for k, (sid, _) in enumerate(turns) if sid == "cue")
        n_host = len(ctx["dialogue"]) - len(ctx["cue_turns"]) - len(ctx["query_turns"])
        ref_cue_at = next(
            k
            for k in range(len(ctx["dialogue"]))
            if ctx["dialogue"][k : k + len(ctx["cue_turns"])] == ctx["cue_turns"]
        )
        cue_texts = [
            t.get("user") or t.get("assistant")
            for s in doc["sessions"]
            if s["id"] == "cue"
            for t in s["turns"]
        ]
        checks = {
            "host": doc["metadata"]["host"] == host["sample_id"],
            "host turns": len(turns) - len(cue_texts) == n_host,
            "cue position": cue_at == ref_cue_at,
            "cue turns": cue_texts == [f"{t['speaker']}: {t['text']}" for t in ctx["cue_turns"]],
            "trigger": probe["question"]
            == "\n".join(f"{t['speaker']}: {t['text']}" for t in ctx["query_turns"]),
            "cue date": datetime.strptime(meta["cue_date"], LOCOMO_TIME).strftime("%Y-%m-%d %H:%M")
            == ctx["cue_time"],
            "query date": datetime.strptime(meta["query_date"], LOCOMO_TIME).strftime(
                "%Y-%m-%d %H:%M"
            )
            == ctx["query_time"],
            "judge evidence": meta["judge_evidence"]
            == unified_input._cue_dialogue_to_evidence(item["cue_dialogue"], host),
        }
        for name, ok in checks.items():
            if not ok:
                problems += 1
                print(f"sample {i}: {name} differs from the reference", file=sys.stderr)
    print(
        f"stitching: {len(docs)} samples compared with build_conv.py (seed {seed}), "
        f"{problems} difference(s)"
    )
    return problems


def _section(prompt: str, title: str, end: str) -> str:
    start = prompt.find(title)
    stop = prompt.find(end, start + len(title))
    return prompt[start + len(title) : stop] if start >= 0 and stop >= 0 else ""


def deterministic_judge(body: dict) -> str:
    """A judge answering from word overlap of prediction and evidence, in one of six shapes
    chosen by the prompt's hash (every path of the reference's parser)."""
    prompt = body["messages"][-1]["content"]
    evidence = set(_WORD.findall(_section(prompt, "Memory/Evidence:", "Model Prediction:").lower()))
    pred = set(_WORD.findall(_section(prompt, "Model Prediction:", "Return your").lower()))
    share = len(evidence & pred) / len(evidence) if evidence else 0.0
    label = "correct" if share >= 0.25 else "partial" if share >= 0.12 else "wrong"
    why = f"overlap {share:.3f}"
    shape = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 6
    return [
        json.dumps({"label": label, "reason": why}),
        f'Here you go:\n```json\n{{"label": "{label}", "reason": "{why}"}}\n```',
        json.dumps({"reason": why, "label": label}),  # reason first: read by json.loads
        f"The prediction is {'incorrect' if label == 'wrong' else label}.",  # keyword fallback
        f'{{"label": "{label}", "reason": {len(why)}}}',  # a number as reason: fallback again
        "",  # an empty answer: "(empty)", no label
    ][shape]


def _results(results: Path | None, checkout: Path, limit: int) -> Path:
    """A memory-lab run on LoCoMo-Plus: ``results``, or a small offline one made here."""
    from memory_lab.cli import main

    if results is None:
        results = Path(tempfile.mkdtemp(prefix="locomo-plus-check-")) / "run"
        source = f"locomo-plus:{checkout}#limit={limit}"
        args = ["run", "--dialogues", source, "--memory", "buffer", "vector", "--quiet"]
        if main([*args, "--no-prompts", "--out", str(results)]) != 0:
            raise SystemExit("the offline run failed")
    return results


def check_judge(checkout: Path, results: Path | None, limit: int) -> int:
    """Problems found judging one run's replies by the reference's code and by ours
    (``memory-lab judge-cognitive``)."""
    from memory_lab.cli import main
    from memory_lab.results.read import read_records

    sys.path.insert(0, str(checkout / "evaluation_framework"))
    from task_eval import llm_as_judge  # the reference, from the user's copy

    results = _results(results, checkout, limit)
    records = [
        r
        for r in read_records(results)
        if r.get("type") == "probe" and r["category"] == "cognitive"
    ]
    out = results.parent / "cognitive-judged.json"
    with OpenAIMock() as mock:
        mock.reply = deterministic_judge
        os.environ["OPENAI_BASE_URL"] = mock.base_url
        os.environ["OPENAI_API_KEY"] = "sk-loopback-mock"
        args = SimpleNamespace(
            model="gpt-4o-mini", backend="call_llm", temperature=0.0, max_tokens=512
        )
        ref = [
            llm_as_judge._judge_one_record(
                {
                    "category": CATEGORY,
                    "prediction": r["reply"],
                    "evidence": r["probe_metadata"]["judge_evidence"],
                },
                args,
            )
            for r in records
        ]
        sent_ref = [q["body"]["messages"][-1]["content"] for q in mock.requests]
        argv = ["judge-cognitive", str(results), "--judge", "openai:gpt-4o-mini"]
        argv += ["--base-url", mock.base_url, "--prompt-from", str(checkout), "--out", str(out)]
        if main(argv) != 0:
            raise SystemExit("memory-lab judge-cognitive failed")
        sent_ours = [q["body"]["messages"][-1]["content"] for q in mock.requests[len(sent_ref) :]]
    document = json.loads(out.read_text("utf-8"))
    ours = document["judged"]
    # ours asks through the run's call cache: a prompt asked before (two probes with the same
    # evidence and reply) is answered by the cache, so it sends each distinct prompt once
    expected = list(dict.fromkeys(sent_ref))
    problems = int(sent_ours != expected)
    problems += sum(
        (a["judge_label"], a["judge_reason"]) != (b["judge_label"], b["judge_reason"])
        or abs(a["judge_score"] - b["judge_score"]) > TOLERANCE
        for a, b in zip(ref, ours, strict=True)
    )
    worst = 0.0
    for memory, our_summary in document["summaries"].items():
        mine = [a for a, b in zip(ref, ours, strict=True) if b["memory"] == memory]
        ref_summary = llm_as_judge._compute_summary(mine)
        same_keys = ref_summary.keys() == our_summary.keys()
        diffs = [
            abs(ref_summary[k] - our_summary[k])
            for k in ("overall_avg", "total_score", "total_samples")
        ]
        diffs += [
            abs(v[k] - our_summary["by_category"][c][k])
            for c, v in ref_summary["by_category"].items()
            for k in ("avg", "score", "count")
        ]
        worst = max(worst, *diffs)
        problems += int(not same_keys or max(diffs) > TOLERANCE)
        print(
            f"  {memory}: reference {ref_summary['overall_avg']} (total "
            f"{ref_summary['total_score']} / {ref_summary['total_samples']}) vs ours "
            f"{our_summary['overall_avg']} (total {our_summary['total_score']})"
        )
    labels = {k: sum(o["judge_label"] == k for o in ours) for k in ("correct", "partial", "wrong")}
    labels["none"] = sum(o["judge_label"] == "" for o in ours)
    print(
        f"judge: {len(ours)} replies judged by both through the mock; prompts identical: "
        f"{sent_ours == expected} ({len(sent_ref)} sent by the reference, {len(sent_ours)} by "
        f"ours, the rest from the call cache); labels {labels}; max |difference| {worst:.1e}; "
        f"{problems} problem(s)"
    )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, required=True, help="a Locomo-Plus checkout")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, help="a memory-lab run on locomo-plus")
    parser.add_argument("--limit", type=int, default=12, help="samples in the run made here")
    args = parser.parse_args()
    problems = check_stitching(args.checkout, args.seed)
    problems += check_judge(args.checkout, args.results, args.limit)
    print("OK" if not problems else f"FAILED: {problems} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
