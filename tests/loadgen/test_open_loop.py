"""The open loop's pacing: late sends count as late, bodies encoded ahead are the ones sent,
and `client_bound` turns true exactly when the client could not keep its schedule."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from infertriage.analyze.stats.latency import ScheduleBehind, judge_client, schedule_behind
from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.loadgen.client import ClientConfig, RequestClient
from infertriage.loadgen.runner import LoadPlan, run_load, run_sync
from infertriage.schemas import RequestRecord
from infertriage.workload import RequestSpec, Schedule, make_specs, parse_workload
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_process, serve_in_thread

FAST = Behavior(ttft_s=0.001, itl_s=0.001)


def _open_loop(
    url: str, offsets: list[float], *, start_in_s: float, workload: str = "synthetic:output=2"
) -> list[RequestRecord]:
    specs = make_specs(parse_workload(workload), len(offsets), seed=3)
    plan = LoadPlan(Schedule(specs, np.asarray(offsets, dtype=float)))
    records: list[RequestRecord] = []
    now = time.perf_counter_ns()
    run_sync(
        run_load(
            plan,
            ClientConfig(base_url=url + "/v1", model="test-model"),
            clock_start_ns=now,
            load_start_ns=now + round(start_in_s * 1e9),
            sink=records.append,
        )
    )
    return records


def test_a_send_after_its_deadline_counts_as_late() -> None:
    # The schedule began 0.4 s before the loop did: every request is overdue at its start,
    # all go out together at the first wake-up, and each keeps its deadline as its
    # scheduled time, so its lateness is in its dispatch lag.
    offsets = [0.0, 0.02, 0.04, 0.06, 0.08, 0.10]
    with serve_in_thread(ServerConfig(behavior=FAST)) as (url, _):
        records = _open_loop(url, offsets, start_in_s=-0.4)
    assert len(records) == len(offsets) and all(r.ok for r in records)
    by_index = sorted(records, key=lambda r: int(r.id.rsplit("-", 1)[1]))
    scheduled = np.asarray([r.scheduled_ts for r in by_index])
    assert np.allclose(scheduled - scheduled[0], offsets, atol=1e-6)
    for record, offset in zip(by_index, offsets, strict=True):
        assert record.dispatch_lag_s >= 0.4 - offset - 1e-3  # never on time, never hidden


def test_bodies_encoded_ahead_are_the_ones_sent() -> None:
    # Output lengths differ from request to request: the server writes as many tokens as
    # the body it received asks, so a body sent with the wrong request would show.
    offsets = [i * 0.005 for i in range(40)]
    with serve_in_thread(ServerConfig(behavior=FAST)) as (url, _):
        records = _open_loop(
            url, offsets, start_in_s=0.05, workload="synthetic:input=8,output=uniform(1,12)"
        )
    assert len(records) == 40 and all(r.ok for r in records)
    assert len({r.max_tokens for r in records}) > 3
    assert all(r.output_tokens == r.max_tokens for r in records)


def _record(scheduled: float, lag: float, queue: float = 0.0) -> RequestRecord:
    return RequestRecord(
        id=f"r-{scheduled}", scheduled_ts=scheduled, sent_ts=scheduled + lag, client_queue_s=queue
    )


def test_a_growing_lag_is_a_client_that_fell_behind() -> None:
    times = np.linspace(0.0, 10.0, 1001)
    falling = [_record(t, 0.3 * t) for t in times]  # a backlog: 3 s behind by the end
    behind = schedule_behind(falling)
    assert behind is not None and behind.fell_behind
    assert behind.behind_s == pytest.approx(2.85, abs=0.05) and behind.span_s == 10.0
    rng = np.random.default_rng(0)
    jitter = [_record(t, float(rng.exponential(0.004))) for t in times]  # late, not behind
    steady = schedule_behind(jitter)
    assert steady is not None and not steady.fell_behind
    # waiting for a --max-concurrency slot is the client's queue, not its lag
    queued = schedule_behind([_record(t, 0.3 * t, queue=0.3 * t) for t in times])
    assert queued is not None and not queued.fell_behind
    assert schedule_behind(falling[:1]) is None
    # `--rate inf`: all due at once, no schedule to keep however long the burst takes
    assert schedule_behind([_record(0.0, 0.001 * i) for i in range(2000)]) is None


@pytest.mark.parametrize("cpu", [0.05, 0.4, 0.95])
def test_a_client_behind_its_schedule_is_bound_whatever_its_cpu(cpu: float) -> None:
    verdict = judge_client(
        cpu_busiest=cpu,
        loop_lag_p99_s=0.2,
        dispatch_lag_p99_s=2.0,
        icl_p50_s=0.001,
        behind=ScheduleBehind(behind_s=2.0, span_s=10.0),
    )
    assert verdict.client_bound and not verdict.host_busy
    assert "behind the schedule" in verdict.reasons[0]
    kept = judge_client(
        cpu_busiest=0.05,
        loop_lag_p99_s=0.02,
        dispatch_lag_p99_s=0.03,
        icl_p50_s=0.001,
        behind=ScheduleBehind(behind_s=0.002, span_s=10.0),
    )
    assert not kept.client_bound and kept.host_busy  # late stamps, schedule kept: the host


def _bench(tmp_path: Path, rate: float) -> tuple[bool, tuple[str, ...]]:
    with serve_in_process(FAST) as url:
        result = run_bench(
            BenchSpec(
                url=url,
                rates=(rate,),
                duration_s=0.5,
                workload="synthetic:input=8,output=2",
                check_tokens=False,
                stop_on_saturation=False,
                out=tmp_path / "run",
            )
        )
    client = result.levels[0].client
    return client.client_bound, client.reasons


def test_a_starved_client_reports_client_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each body takes 5 ms to make, off the CPU (as a process its host does not run):
    # 200 requests due in 0.5 s cannot leave before 1 s, so the last tenth leaves at least
    # 0.4 s late whatever the host does, while the client's own CPU stays low.
    real_body = RequestClient.body

    def slow_body(self: RequestClient, spec: RequestSpec) -> bytes:
        time.sleep(0.005)
        return real_body(self, spec)

    monkeypatch.setattr(RequestClient, "body", slow_body)
    bound, reasons = _bench(tmp_path, 400.0)
    assert bound, reasons
    assert any("behind the schedule" in reason for reason in reasons), reasons


def test_a_modest_rate_is_not_client_bound(tmp_path: Path) -> None:
    bound, reasons = _bench(tmp_path, 20.0)
    assert not bound, reasons
