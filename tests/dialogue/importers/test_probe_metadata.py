"""Probe metadata is declared once, by the benchmark that writes it: every key an importer writes
is in its ``BENCHMARK.probe_keys``, every declared key is written by some probe of the fixtures,
and the declared accessors read back what the importer wrote."""

from __future__ import annotations

import pytest

from memory_lab.benchmarks.locomo import importer as locomo
from memory_lab.dialogue.importers import benchmarks, import_source
from memory_lab.dialogue.importers.common import MISSING_EVIDENCE_KEY

from ...conftest import FIXTURES
from .beam_fixture import conversation, questions
from .test_locomo_plus import checkout


def _source(fmt: str, tmp_path):
    """A fixture of ``fmt`` whose probes, together, write every key it declares."""
    if fmt == "beam":
        qs = questions()
        qs["information_extraction"][0]["source_chat_ids"] = [0, 99]  # 99 names no message
        return conversation(tmp_path / "100K" / "1", qs=qs)
    if fmt == "locomo-plus":
        return checkout(tmp_path)
    return {
        "locomo": FIXTURES / "locomo" / "locomo_mini.json",
        "longmemeval": FIXTURES / "longmemeval" / "longmemeval_mini.json",
        "realmem": FIXTURES / "realmem",
    }[fmt]


def written(fmt: str, tmp_path) -> list[dict]:
    """The metadata of every probe ``fmt``'s importer writes for its fixture."""
    docs = import_source(fmt, _source(fmt, tmp_path)).documents
    return [p["metadata"] for d in docs for p in d["probes"]]


@pytest.mark.parametrize("fmt", sorted(benchmarks()))
def test_every_written_key_is_declared_and_every_declared_key_written(fmt, tmp_path):
    bench = benchmarks()[fmt]
    keys = bench.probe_keys
    assert len(set(keys)) == len(keys), f"{fmt} declares a key twice"
    metadata = written(fmt, tmp_path)
    assert metadata
    seen = {key for meta in metadata for key in meta}
    assert seen <= set(keys), f"{fmt} writes keys it does not declare: {seen - set(keys)}"
    assert set(keys) <= seen, f"{fmt} declares keys it never writes: {set(keys) - seen}"
    # its own category is in every probe, so the table by category can show it
    assert bench.category_key in keys
    assert all(bench.category_key in meta for meta in metadata)


def test_locomo_category_and_adversarial_read_what_the_importer_wrote(tmp_path):
    metadata = written("locomo", tmp_path)
    ids = [locomo.category_id(meta) for meta in metadata]
    assert set(ids) == {1, 2, 3, 4, locomo.ADVERSARIAL_CATEGORY}
    adversarial = [meta for meta in metadata if locomo.is_adversarial(meta)]
    assert len(adversarial) == ids.count(locomo.ADVERSARIAL_CATEGORY) == 1
    assert adversarial[0][locomo.WRONG_ANSWERS_KEY] == ["a sunrise"]
    assert any(MISSING_EVIDENCE_KEY in meta for meta in metadata)
    # the id as a string (a hand-written dialogue) is read alike; a probe not LoCoMo's is not one
    assert locomo.is_adversarial({locomo.CATEGORY_KEY: "5"})
    assert not locomo.is_adversarial({}) and not locomo.is_adversarial(None)
    assert locomo.category_id(None) is None
    assert locomo.CATEGORY_MAPS["paper"][locomo.ADVERSARIAL_CATEGORY] == "abstention"
