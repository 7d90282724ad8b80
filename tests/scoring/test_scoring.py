from memory_lab.dialogue.model import Probe
from memory_lab.scoring.probes import score_probe


def probe(category="update", answers=("Busan",), stale=("Seoul",)):
    return Probe("q", "s1.t1", "Where do I live now?", tuple(answers), tuple(stale), (), category)


def test_correct_stale_and_context_hit_are_separate_facts():
    s = score_probe(probe(), "I live in Seoul.", "Human: I moved to Busan.")
    assert not s.correct and s.stale and s.context_hit
    s = score_probe(probe(), "Seoul before, Busan now.", "Human: nothing")
    assert s.correct and not s.stale and not s.context_hit


def test_abstention_probes_are_correct_only_when_the_reply_abstains():
    p = probe(category="abstention", answers=(), stale=())
    assert score_probe(p, "I don't know.", "").correct
    assert not score_probe(p, "Your sister is a nurse.", "").correct
    assert score_probe(p, "I don't know.", "").context_hit is None


def test_an_abstaining_reply_is_never_correct_for_an_answerable_probe():
    assert not score_probe(probe(), "I don't know. Busan?", "").correct


def test_evidence_recall_counts_turns_carried_verbatim_or_nearly():
    from memory_lab.scoring.probes import evidence_recall

    evidence = {
        "a": "I moved to Busan last weekend, and the new flat is near Haeundae beach.",
        "b": "My sister Hana starts her PhD in Lyon in October.",
    }
    buffer = f"Human: {evidence['a']}\nAI: ok"
    assert evidence_recall(evidence, buffer) == 0.5
    # a summary that keeps the fact's sentence, re-cased and re-punctuated, still carries it
    summary = "Human: i moved to busan last weekend and the new flat is near haeundae beach"
    assert evidence_recall(evidence, summary + " Human: my sister Hana starts her PhD") == 1.0
    # one that keeps only the topic words does not
    assert evidence_recall(evidence, "The human talked about moving and a sister's studies.") == 0
    # exact credit from the turn ids a memory reported
    assert evidence_recall(evidence, "", recalled_ids=("b",)) == 0.5
    assert evidence_recall({}, buffer) is None
    assert evidence_recall({"k": "부산으로 이사했어요"}, "Human: 저는 부산으로 이사했어요.") == 1.0
