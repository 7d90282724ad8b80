"""Our rank scores against LongMemEval's own code, on random rankings.

Imports ``src/retrieval/eval_utils.py`` of ``xiaowu0162/LongMemEval`` from a fetched git copy
(a bare mirror read with ``git show`` into a temporary folder; nothing of it is kept or
committed; its ``np.asfarray``, gone in NumPy 2, is read as ``np.asarray(..., dtype=float)``)
and compares, on random corpora of sessions and turns, random evidence and random rankings, at
k = 1, 3, 5, 10, 30, 50:

- turn level: its ``evaluate_retrieval`` against ``memory_lab.scoring.ranks.score_ranked``
  (recall_any, recall_all, ndcg_any);
- session level, recall: its ``evaluate_retrieval_turn2session`` against ours (the turn ranking
  mapped to sessions, each at its best place);
- session level, NDCG: its ``evaluate_retrieval`` on the session ranking over a session corpus
  (its session-granularity retrieval), which is our definition; its turn2session NDCG counts
  each retrieved turn of an evidence session again and is not ours (see the module docstring
  of ``memory_lab.scoring.ranks``), so it is not compared.

Prints the cases compared and the largest absolute difference; exits 1 above 1e-9. Without the
fetched copy it says so and exits 0.

Usage::

    python benchmarks/rank_scores_check.py [--repo DIR] [--cases 3000]
"""

from __future__ import annotations

import argparse
import importlib
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_lab.scoring.ranks import score_ranked, session_ranking, turn_ranking  # noqa: E402

REPO = Path("/work/.mirror/xiaowu0162+LongMemEval/repo")
KS = (1, 3, 5, 10, 30, 50)
TOLERANCE = 1e-9


def load_reference(repo: Path):
    source = subprocess.run(
        ["git", "-C", str(repo), "show", "HEAD:src/retrieval/eval_utils.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    source = source.replace("np.asfarray(relevances)", "np.asarray(relevances, dtype=float)")
    folder = Path(tempfile.mkdtemp())
    (folder / "lme_eval_utils.py").write_text(source)
    sys.path.insert(0, str(folder))
    return importlib.import_module("lme_eval_utils")


def compare(ref, cases: int, seed: int = 0) -> tuple[int, float]:
    rng = random.Random(seed)
    worst, n = 0.0, 0
    for _ in range(cases):
        corpus = [f"s{s}_{t}" for s in range(rng.randint(1, 8)) for t in range(rng.randint(1, 6))]
        evidence = rng.sample(corpus, rng.randint(1, min(4, len(corpus))))
        order = list(range(len(corpus)))
        rng.shuffle(order)
        order = order[: rng.randint(1, len(order))]  # a memory shows its top few
        session_of = {c: c.split("_")[0] for c in corpus}
        turns = turn_ranking([(corpus[i],) for i in order])
        sessions = session_ranking(turns, session_of)
        evidence_sessions = sorted({session_of[e] for e in evidence})
        session_corpus = sorted(set(session_of.values()))
        session_order = [session_corpus.index(s) for _, s in sessions]
        for k in KS:
            theirs = ref.evaluate_retrieval(order, evidence, corpus, k=k)
            ours = score_ranked(turns, set(evidence), k)
            diffs = [abs(a - b) for a, b in zip(theirs, vars(ours).values(), strict=True)]
            any2, all2, _ = ref.evaluate_retrieval_turn2session(order, evidence, corpus, k=k)
            _, _, ndcg2 = ref.evaluate_retrieval(
                session_order, evidence_sessions, session_corpus, k=k
            )
            at = score_ranked(sessions, {("session", s) for s in evidence_sessions}, k)
            diffs += [abs(any2 - at.recall_any), abs(all2 - at.recall_all)]
            diffs += [abs(ndcg2 - at.ndcg_any)]
            worst = max(worst, *diffs)
            n += 1
    return n, worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="a fetched LongMemEval git copy")
    parser.add_argument("--cases", type=int, default=3000)
    args = parser.parse_args()
    if not (args.repo / "HEAD").exists() and not (args.repo / ".git").exists():
        print(f"no LongMemEval copy at {args.repo}: fetch github:xiaowu0162/LongMemEval")
        return 0
    n, worst = compare(load_reference(args.repo), args.cases)
    print(f"{n} (ranking, k) cases against LongMemEval's eval_utils.py: max |diff| {worst:.3g}")
    return 1 if worst > TOLERANCE else 0


if __name__ == "__main__":
    sys.exit(main())
