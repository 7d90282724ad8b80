"""Our BEAM scores against BEAM's own ``compute_metrics.py``, on the same replies, rubrics and
judge outputs.

Imports ``src/evaluation/compute_metrics.py`` and ``src/prompts.py`` of
``mohammadtavakoli78/BEAM`` from a fetched git copy (a bare mirror read with ``git show`` into a
temporary folder; nothing of it is kept or committed). The modules it imports that the judge
and τ-b paths never call (``sentence_transformers``, ``rouge_score``, ``json_repair``, its
``src/llm.py`` with its API configuration) are stood in for by empty modules; ``nltk.download``
is made a no-op (it would reach the network at import).

Both sides talk to one deterministic judge through the loopback OpenAI mock
(``tests/models/openai_mock.py``) with ``langchain_openai.ChatOpenAI``: a judge prompt is
answered with a score of 1.0, 0.5 or 0.0 chosen by a hash of its rubric item and reply, written
as bare JSON, a fenced block or JSON after a sentence; an equivalence question with YES when the
reference item is in the reply's line or by a hash of the pair; the reference's discarded
fact-extraction call with a fixed list. On random questions of every ability (random rubrics of
1-6 items, replies of 1-8 lines, some lines being rubric items in a shuffled order, blank lines
included) it compares, per question, the reference's ``evaluate_<ability>`` ``llm_judge_score``
and (event ordering) ``tau_norm`` with ``memory_lab.benchmarks.beam.grading.score_question`` under
``--beam-protocol reference``. The prompts our side uses are read from the same copy
(``load_beam_prompts``), as a user's run reads them.

Prints the questions compared, the largest absolute difference of each score, and how many
questions the corrected protocol scores differently (0.5 kept); exits 1 above 1e-9. Without
the fetched copy it says so and exits 0.

Usage::

    python benchmarks/beam_scores_check.py [--repo DIR] [--cases 400]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import math
import random
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_lab.benchmarks.beam.grading import LLMBeamGrader, score_question  # noqa: E402
from memory_lab.benchmarks.beam.importer import ABILITIES  # noqa: E402
from memory_lab.benchmarks.beam.judge import load_beam_prompts  # noqa: E402
from tests.models.openai_mock import OpenAIMock  # noqa: E402

REPO = Path("/work/.mirror/mohammadtavakoli78+BEAM/repo")
TOLERANCE = 1e-9
FILES = ("src/evaluation/compute_metrics.py", "src/prompts.py")
WORDS = "sprint budget roof paint deploy login cache schema tests review launch march api".split()
_ITEM = re.compile(
    r"RUBRIC CRITERION \(what to check\): (.*?)\n"
    r"- RESPONSE TO EVALUATE: (.*?)\n\n## EVALUATION RUBRIC",
    re.S,
)
_SNIPPETS = re.compile(r"First snippet: (.*?) \n\n\s*Second snippet: (.*?)\n\s*$", re.S)


def _h(*parts: str) -> int:
    return hashlib.sha256("\x00".join(parts).encode()).digest()[0]


def judge(body: dict) -> str:
    """The deterministic judge: what a model would say to each of BEAM's prompts."""
    messages = body["messages"]
    last = messages[-1]["content"]
    if len(messages) == 2 and "binary classifier" in messages[0]["content"]:
        m = _SNIPPETS.search(last)
        first, second = (m.group(1), m.group(2)) if m else ("", last)
        same = first.strip().lower() in second.lower() or _h(first, second) < 40
        return "YES" if same else "No."
    m = _ITEM.search(last)
    if not m:  # the reference's fact extraction, whose output it discards
        return "1. a fact\n2. another fact"
    item, reply = m.group(1), m.group(2)
    score = (1.0, 0.5, 0.0)[_h(item, reply) % 3]
    body_json = f'{{"score": {score}, "reason": "because"}}'
    style = _h(reply, item) % 3
    if style == 0:
        return body_json
    if style == 1:
        return f"```json\n{body_json}\n```"
    return f"Here is my evaluation: {body_json}"


def fetch_copy(repo: Path) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="beam-ref-"))
    for name in FILES:
        text = subprocess.run(
            ["git", "--git-dir", str(repo), "show", f"HEAD:{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    for package in ("src", "src/evaluation"):
        (folder / package / "__init__.py").write_text("")
    (folder / "src" / "llm.py").write_text("")  # its API configuration: never called here
    return folder


def load_reference(folder: Path):
    import nltk

    nltk.download = lambda *a, **k: True
    stand_ins = {
        "sentence_transformers": {"SentenceTransformer": None, "util": None},
        "rouge_score": {"rouge_scorer": None},
        "json_repair": {"repair_json": lambda text: text},
    }
    for name, attrs in stand_ins.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules.setdefault(name, module)
    sys.path.insert(0, str(folder))
    return importlib.import_module("src.evaluation.compute_metrics")


def case(rng: random.Random) -> tuple[str, str, list[str], str]:
    ability = rng.choice(ABILITIES)
    words = lambda k: " ".join(rng.choice(WORDS) for _ in range(k))  # noqa: E731
    rubric = [
        rng.choice(["LLM response should state: ", "LLM response should mention: ", ""])
        + words(rng.randint(1, 4))
        for _ in range(rng.randint(1, 6))
    ]
    lines = [words(rng.randint(1, 5)) for _ in range(rng.randint(0, 5))]
    lines += rng.sample(rubric, rng.randint(0, len(rubric)))
    rng.shuffle(lines)
    lines += [""] * rng.randint(0, 1)
    reply = "\n".join(lines) or words(3)
    return ability, f"What about the {words(2)}?", rubric, reply


def same(a: float | None, b: float | None) -> float:
    if a is None or b is None:
        return 0.0 if a is b else math.inf
    if math.isnan(a) or math.isnan(b):
        return 0.0 if math.isnan(a) and math.isnan(b) else math.inf
    return abs(a - b)


def compare(ref, cases: int, base_url: str, prompts) -> dict[str, float]:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        model="judge", api_key="unused", base_url=base_url, max_retries=0, temperature=0
    )
    grader = LLMBeamGrader(model, prompts)
    rng = random.Random(0)
    worst = {"judge": 0.0, "tau": 0.0}
    changed = taus = 0
    tau_values: list[float] = []
    for _ in range(cases):
        ability, question, rubric, reply = case(rng)
        theirs = getattr(ref, f"evaluate_{ability}")(
            rubric=rubric, llm_response=reply, probing_question=question, model=model
        )
        ours = score_question(ability, question, rubric, reply, grader, "reference", prompts.judge)
        worst["judge"] = max(worst["judge"], same(theirs["llm_judge_score"], ours.judge_score))
        if ability == "event_ordering":
            taus += 1
            worst["tau"] = max(worst["tau"], same(theirs["tau_norm"], ours.tau_norm))
            tau_values.append(ours.tau_norm)
        fixed = score_question(ability, question, rubric, reply, grader, "corrected", prompts.judge)
        changed += fixed.judge_score != ours.judge_score
    distinct = len({round(t, 12) for t in tau_values if not math.isnan(t)})
    nans = sum(math.isnan(t) for t in tau_values)
    return {**worst, "taus": taus, "changed": changed, "distinct": distinct, "nans": nans}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="a bare git copy of BEAM")
    parser.add_argument("--cases", type=int, default=400)
    args = parser.parse_args()
    if not (args.repo / "HEAD").is_file():
        print(f"no BEAM copy at {args.repo} (fetch mohammadtavakoli78/BEAM): nothing compared")
        return 0
    folder = fetch_copy(args.repo)
    ref = load_reference(folder)
    prompts = load_beam_prompts(folder)
    with OpenAIMock() as mock:
        mock.reply = judge
        result = compare(ref, args.cases, mock.base_url, prompts)
    print(
        f"{args.cases} questions ({result['taus']} event ordering: {result['distinct']} distinct "
        f"tau_norm values, {result['nans']} undefined) through one deterministic "
        f"judge: largest |ours - BEAM's compute_metrics| judge score {result['judge']:.3g}, "
        f"tau_norm {result['tau']:.3g}; the corrected protocol scores "
        f"{result['changed']} of them differently"
    )
    ok = result["judge"] <= TOLERANCE and result["tau"] <= TOLERANCE
    print("OK" if ok else f"FAIL: above {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
