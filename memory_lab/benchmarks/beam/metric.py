"""BEAM's own score as a declared figure: not a summary column but ``beam_scores.csv``, written by
``memory-lab score beam`` after a run; the report's answer names it when there."""

from memory_lab.scoring.metrics import ANSWERING_MODEL, JUDGE, Metric

BEAM_SCORE = Metric(
    "beam_score",
    "BEAM",
    "BEAM score (its rubric judge)",
    "share",
    "BEAM questions with a graded rubric item, per ability, then over abilities",
    needs=(ANSWERING_MODEL, JUDGE),
    table=False,  # not a summary column: beam_scores.csv, the BEAM section and the answer
    compared=False,
)
