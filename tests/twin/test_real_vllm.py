"""The twin against real vLLM on H100 under load (inference-perf stages in the shared fixtures).

Short replays of single stages: the whole replay, every stage at its full length, is
`benchmarks/twin_vs_vllm.py` (its figures in benchmarks/README.md). These pin what the
calibration must keep: a stage that held holds in the twin with its per-token interval and
E2E close to the real ones, and a stage that overloaded the real server overloads the twin.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from infertriage.twin.results import StageSummary
from infertriage.twin.scenario import scenario_from_mapping
from infertriage.twin.simulate import Stage, simulate
from infertriage_testing.vllm_runs import OVERLOAD_TTFT_S, RealStage, load_stages

RUNS = "calibration/vllm-h100-inference-perf"


@pytest.fixture
def stages(shared_fixture: Callable[[str], Path]) -> list[RealStage]:
    return load_stages(shared_fixture(RUNS))


def _one(stages: list[RealStage], experiment: str, rate: float) -> RealStage:
    return next(s for s in stages if s.experiment == experiment and s.rate == rate)


def _replay(real: RealStage, duration_s: float) -> StageSummary:
    result = simulate(
        scenario_from_mapping(real.scenario()), stages=[Stage(real.rate, duration_s)],
        workload=real.workload, arrivals="constant", timeout_s=300.0,
    )  # fmt: skip
    return result.stages[0]


def test_the_runs_read_as_measured(stages: list[RealStage]) -> None:
    assert len(stages) == 24
    assert {s.model for s in stages} == {"llama-2-7b", "llama-2-70b", "mixtral-8x7b",
                                         "codellama-34b"}  # fmt: skip
    overloaded = [s for s in stages if s.overloaded]
    assert len(overloaded) == 4 and all(s.experiment.endswith("reasoning") for s in overloaded)
    general = _one(stages, "llama-2-7b-tp1-general", 8.0)
    # (E2E − TTFT) / (max_tokens − 1): 2.058 s and 27 ms over 247 intervals.
    assert general.token_interval_s == pytest.approx(8.22e-3, rel=0.01)
    assert general.concurrency == pytest.approx(16.5, rel=0.01)


@pytest.mark.parametrize(
    ("experiment", "rate"),
    [("llama-2-7b-tp1-general", 8.0), ("llama-2-7b-tp1-general", 20.0)],
)
def test_a_stage_that_held_holds_in_the_twin_with_its_latencies(
    stages: list[RealStage], experiment: str, rate: float
) -> None:
    real = _one(stages, experiment, rate)
    twin = _replay(real, duration_s=60.0)
    assert twin.num_failed == 0
    interval = (twin.e2e.mean_s - twin.ttft.mean_s) / (real.output_len - 1)
    assert interval == pytest.approx(real.token_interval_s, rel=0.10)
    assert twin.e2e.mean_s == pytest.approx(real.e2e_s, rel=0.10)
    # The first cycle of prompts is not yet cached in a short replay: TTFT within 25 %.
    assert twin.ttft.mean_s == pytest.approx(real.ttft_s, rel=0.25)


def test_a_stage_that_overloaded_the_real_server_overloads_the_twin(
    stages: list[RealStage],
) -> None:
    real = _one(stages, "llama-2-7b-tp1-reasoning", 4.0)
    assert real.overloaded
    twin = _replay(real, duration_s=240.0)
    assert twin.ttft.mean_s >= OVERLOAD_TTFT_S
