"""twin.simulate and twin.traffic: the workload library's chat mix, arrivals, the result, and
the speed-up."""

from __future__ import annotations

import importlib
import time

import numpy as np
import pytest

from infertriage.twin.engine import EngineCore
from infertriage.twin.scenario import load_scenario
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.simulate import simulate
from infertriage.twin.traffic import Stage, make_traffic


def test_the_chat_mix_has_the_designed_shape() -> None:
    # The workload library's chat mix: the shared prefix lies inside a prompt's length, so the
    # designed distribution holds over every prompt (the prefixed ones are the long ones).
    traffic = make_traffic(rate=4, num_requests=4000, max_model_len=8192, vocab_size=1000, seed=1)
    prompts = np.array([len(t.prompt_token_ids) for t in traffic])
    outputs = np.array([t.max_tokens for t in traffic])
    assert np.median(prompts) == pytest.approx(512, rel=0.08)
    assert np.percentile(prompts, 90) == pytest.approx(2048, rel=0.12)
    assert prompts.max() <= 4096
    assert np.median(outputs) == pytest.approx(256, rel=0.08)
    assert np.percentile(outputs, 90) == pytest.approx(1024, rel=0.12)
    shared = [t for t in traffic if t.shares_prefix]
    assert len(shared) / len(traffic) == pytest.approx(0.2, abs=0.03)
    assert min(len(t.prompt_token_ids) for t in shared) > 1024
    assert len({t.prompt_token_ids[:1024] for t in shared}) == 1
    gaps = np.diff([t.arrival_ts for t in traffic])
    assert gaps.mean() == pytest.approx(0.25, rel=0.06)


def test_fixed_lengths_and_constant_arrivals() -> None:
    traffic = make_traffic(
        rate=2,
        num_requests=5,
        max_model_len=8192,
        vocab_size=1000,
        input_len=100,
        output_len=7,
        arrivals="constant",
    )
    assert [t.arrival_ts for t in traffic] == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert {len(t.prompt_token_ids) for t in traffic} == {100}
    assert {t.max_tokens for t in traffic} == {7}


def test_a_simulation_is_seeded_and_its_result_serialises() -> None:
    first = simulate(Scenario(), rate=8, num_requests=40)
    again = simulate(Scenario(), rate=8, num_requests=40)
    assert first.ttft == again.ttft and first.itl == again.itl
    assert first.num_completed == 40
    assert first.output_throughput_tok_s > 0 and first.request_throughput_rps > 0
    assert 0 < first.gpu_util <= 1 and 0 <= first.frontend_busy < 0.2
    assert '"ttft"' in first.model_dump_json()
    other = simulate(Scenario(), rate=8, num_requests=40, seed=9)
    assert other.ttft != first.ttft


def test_a_thousand_requests_simulate_far_faster_than_real_time() -> None:
    # The goals (issue 35: 1,000x at 10 req/s) are benchmarks/simulate_speed.py's; this
    # guards against collapse.
    # By CPU time, as the benchmark judges it: other work on the host stretches the wall
    # clock (51-74x with four spinning processes on two cores, 151-178x by CPU).
    cpu_s = time.process_time()
    result = simulate(Scenario(), rate=4, num_requests=1000)
    cpu_s = time.process_time() - cpu_s
    assert result.num_completed == 1000
    speedup = result.duration_s / cpu_s
    assert speedup >= 20, f"only {speedup:.0f}x faster than real time"


def _numbers(value: object, path: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in _numbers(item, f"{path}.{key}").items()
        }
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in _numbers(item, f"{path}[{i}]").items()
        }
    return {path: value}


_SHORTCUT_LOADS: dict[str, tuple[str, dict[str, object]]] = {
    "healthy": ("healthy", {"rate": 10, "num_requests": 150}),
    "kv-pressure": ("kv-pressure", {"rate": 10, "num_requests": 150}),  # preempts
    "overload": ("kv-pressure", {"rate": 14, "num_requests": 200}),  # preempts ~120 times
    "time-outs": ("healthy", {"rate": 30, "num_requests": 200, "timeout_s": 3.0}),
    "time-outs-preempting": ("kv-pressure", {"rate": 12, "num_requests": 150, "timeout_s": 4.0}),
    "prefix-cache": (
        "healthy",
        {
            "rate": 8,
            "num_requests": 200,
            "workload": "prefix:groups=8,prefix=512,input=64,output=64",
        },
    ),
    # back-to-back stages: each step's cost goes to the stage it started in, runs included
    "stages": (
        "healthy",
        {"stages": (Stage(4.0, 6.0), Stage(14.0, 5.0), Stage(2.0, 6.0))},
    ),
}


@pytest.mark.parametrize("case", list(_SHORTCUT_LOADS))
def test_decode_runs_give_the_result_single_steps_give(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The shortcuts (`EngineCore.step_decode_run`, and full steps' plain decodes taken as one
    # group, `EngineCore.step(group_decodes=True)`) against the engine taken one step at a
    # time, each request through its own `ScheduledRequest` and `RequestOutput`: every figure
    # the same to float rounding, the KV usage's mean and peak included (each run's steps
    # weighed by their own usage, not the run's last after its frees), with preemption,
    # time-outs (aborts) and prefix-cache hits.
    scenario, load = _SHORTCUT_LOADS[case]

    def run() -> dict[str, object]:
        result = simulate(load_scenario(scenario), **load)  # type: ignore[arg-type]
        return _numbers(result.model_dump(mode="json", exclude={"wall_s", "speedup"}))

    shortcut = run()
    monkeypatch.setattr(EngineCore, "step_decode_run", lambda *_args, **_kw: None)
    simulate_module = importlib.import_module("infertriage.twin.simulate")
    monkeypatch.setattr(simulate_module, "_GROUP_DECODES", False)
    single = run()
    exercised = {
        "kv-pressure": ".num_preemptions",
        "overload": ".num_preemptions",
        "time-outs": ".num_timed_out",
        "time-outs-preempting": ".num_preemptions",
        "prefix-cache": ".prefix_cache_hit_rate",
    }
    if case in exercised:
        assert single[exercised[case]] > 0, exercised[case]  # type: ignore[operator]
    assert shortcut.keys() == single.keys()
    for key, value in single.items():
        if isinstance(value, float):
            assert shortcut[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
        else:
            assert shortcut[key] == value, key
