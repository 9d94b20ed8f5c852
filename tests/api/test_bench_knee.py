"""`bench --sweep` on the twin's queue-bound scenario finds the knee `simulate` predicts.

queue-bound seats 8 requests (max_num_seqs 8) with memory to spare, so its
capacity is 8 / (one request's time in the batch). `simulate` on a virtual clock
at an overwhelming rate gives that maximum throughput; the real-time twin behind
HTTP, swept by `bench`, must put its knee within ±15 % of it (the issue's bar).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.api.bench import run_bench
from infertriage.api.simulate import simulate
from infertriage.api.specs import BenchSpec, ClientSpec, SimulateSpec
from infertriage.twin.process import TwinProcess

INPUT, OUTPUT = 64, 16


@pytest.mark.slow
def test_sweep_knee_matches_simulates_maximum_throughput(tmp_path: Path) -> None:
    predicted = simulate(
        SimulateSpec(
            scenario="queue-bound", rate=1000.0, num_requests=400, input_len=INPUT,
            output_len=OUTPUT, arrivals="constant",
        )
    ).request_throughput_rps  # fmt: skip
    with TwinProcess("queue-bound", load_time_s=0.1) as twin:
        result = run_bench(
            BenchSpec(
                url=twin.url,
                sweep=True,
                duration_s=2.0,
                drain_timeout_s=1.0,
                arrival="constant",
                out=tmp_path / "run",
                workload=f"synthetic:input={INPUT},output={OUTPUT}",
                client=ClientSpec(endpoint="completions"),
            )
        )
    knee = result.knee
    assert knee is not None and knee.knee_rate is not None, [lv.stable for lv in result.levels]
    figures = (
        f"knee {knee.knee_rate:.1f}, probe {knee.max_throughput:.1f}, simulate {predicted:.1f}"
    )
    assert knee.max_throughput == pytest.approx(predicted, rel=0.15), figures
    assert knee.knee_rate == pytest.approx(predicted, rel=0.15), figures
    rates = [lv for lv in result.levels if lv.mode == "rate"]
    assert rates[0].stable and rates[-1].stable is False  # ¼ of capacity holds; 1.25× does not
    assert not any(lv.client.client_bound for lv in result.levels)
