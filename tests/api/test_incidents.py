"""The corpus of real incidents (tests/data/incidents): every case well formed and sourced,
none refused for its format or crashing, no confident wrong verdict where the thread found
nothing or a metric bug, and the accuracy no lower than benchmarks/README.md records.

Each case is an excerpt pasted in a public issue thread, labelled from the thread (see each
file's header and the README.md beside it); infertriage_testing.incidents runs it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from infertriage_testing.incidents import LABELS, LAYERS, Case, Outcome, load_cases, run_case, score

ROOT = Path(__file__).parents[1] / "data" / "incidents"
CASES = load_cases(ROOT)
ENGINES = {"vllm", "sglang", "llamacpp", "tgi", "trtllm"}
# the corpus's accuracy when this floor was last raised (benchmarks/incident_corpus.py): a
# change that loses a case fails here; one that wins cases raises it
FLOOR = 34


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[Outcome]:
    workdir = tmp_path_factory.mktemp("incidents")
    return [run_case(case, workdir) for case in CASES]


def test_the_corpus_is_large_and_every_case_is_sourced() -> None:
    assert len(CASES) >= 40
    assert {c.engine for c in CASES} == ENGINES
    for case in CASES:
        assert case.header["source"].startswith("https://github.com/"), case.name
        assert case.expect in LABELS and case.excerpt.strip(), case.name
    labels = Counter(c.expect for c in CASES)
    assert labels["healthy"] >= 3 and labels["artefact"] >= 3  # misread and metric-bug cases


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_no_case_crashes(case: Case, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path)
    assert outcome.exit_code in (0, 2), outcome.error
    if outcome.exit_code == 2:  # a refusal is one sentence naming what was expected
        assert len(outcome.error.splitlines()) == 1 and "Traceback" not in outcome.error


def test_no_confident_layer_where_the_thread_found_none(outcomes: list[Outcome]) -> None:
    """Healthy and artefact cases: a primary layer there is the worst answer — a wrong cause
    stated with confidence."""
    wrong = [
        f"{o.case.name}: {o.finding}"
        for o in outcomes
        if o.case.expect in ("healthy", "artefact") and o.primary in LAYERS
    ]
    assert not wrong


def test_accuracy_holds(outcomes: list[Outcome]) -> None:
    right = sum(score(o) for o in outcomes)
    misses = [f"{o.case.name}: {o.case.expect} -> {o.verdict}" for o in outcomes if not score(o)]
    assert right >= FLOOR, "\n".join(misses)
