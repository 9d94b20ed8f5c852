"""The real-time twin behind HTTP and `simulate` on a virtual clock agree at the same load.

Both see the same requests at the same moments: `simulate`'s own seeded Poisson schedule
(4 req/s, 512 prompt and 64 output tokens) is written out as a trace and replayed by
`run_bench` against the twin. Without that, the two draw different arrivals, and each
request's wait for the next step boundary (0 to one decode step, 8 ms, against a TTFT of
about 22 ms) makes a p50 over 80 requests wander by more than the 10 % asked for.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.api.bench import run_bench
from infertriage.twin.engine import EngineCore
from infertriage.twin.process import TwinProcess
from infertriage.twin.scenario import load_scenario
from infertriage.twin.simulate import simulate
from infertriage.twin.traffic import make_traffic

RATE, NUM, INPUT, OUTPUT, SEED = 4.0, 80, 512, 64, 1


def _write_trace(path: Path) -> None:
    engine = EngineCore(load_scenario("healthy"))
    traffic = make_traffic(
        rate=RATE,
        num_requests=NUM,
        max_model_len=engine.max_model_len,
        vocab_size=engine.vocab_size,
        input_len=INPUT,
        output_len=OUTPUT,
        seed=SEED,
    )
    lines = (
        {"timestamp": t.arrival_ts, "input_length": INPUT, "output_length": OUTPUT} for t in traffic
    )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.slow
def test_p50_ttft_and_itl_agree_within_ten_percent(tmp_path: Path) -> None:
    """Measured (2-core machine at load average 3-5 from other work): TTFT p50 22.5-22.8 ms
    real against 22.2 ms simulated (+1.7 to +2.9 %), ITL p50 7.82 against 7.83 ms; at load
    6.5 on another schedule up to +15 %. `simulate` models the twin's HTTP and thread
    hand-off as measured constants (`twin.virtual_frontend`); what a busy host adds on top
    is the margin."""
    trace = tmp_path / "trace.jsonl"
    _write_trace(trace)
    with TwinProcess("healthy", load_time_s=0.1) as twin:
        bench = run_bench(
            url=twin.url, endpoint="completions", workload=f"trace:{trace}", out=tmp_path / "run"
        )
    real = bench.levels[0].summary
    assert real.ttft is not None and real.itl is not None
    assert real.num_failed == 0 and real.num_ok == NUM
    virtual = simulate(
        load_scenario("healthy"),
        rate=RATE,
        num_requests=NUM,
        input_len=INPUT,
        output_len=OUTPUT,
        seed=SEED,
    )
    assert real.ttft.p50 == pytest.approx(virtual.ttft.p50_s, rel=0.10)
    assert real.itl.p50 == pytest.approx(virtual.itl.p50_s, rel=0.10)
