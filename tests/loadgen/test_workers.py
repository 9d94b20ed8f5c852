"""`--workers N`: one schedule split over processes, records merged into one run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.schemas import RequestRecord, RunDir
from infertriage.workload import make_offsets, parse_arrivals
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread


def test_two_workers_share_one_schedule_and_one_run(tmp_path: Path) -> None:
    with serve_in_thread(ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))) as (url, srv):
        result = run_bench(
            BenchSpec(
                url=url,
                rates=[40.0],
                num_requests=30,
                workers=2,
                seed=3,
                out=tmp_path / "run",
                workload="synthetic:input=8,output=6",
            )
        )
        assert srv.num_requests == 30
    level = result.levels[0]
    assert level.client.num_workers == 2 and level.summary.num_ok == 30
    run = RunDir.open(tmp_path / "run")
    records = list(run.iter_records(run.requests, RequestRecord))
    assert len(records) == 30 and len({r.id for r in records}) == 30
    # The union of the workers' deadlines is the one precomputed schedule, on one clock.
    scheduled = np.sort([r.scheduled_ts for r in records])
    expected = make_offsets(parse_arrivals("poisson", 40.0), num_requests=30, seed=3)
    assert scheduled - scheduled[0] == pytest.approx(expected, abs=1e-6)
    lags = [r.dispatch_lag_s for r in records]
    assert float(np.median(lags)) < 0.02 and max(lags) < 0.5  # a loaded host delays some sends
