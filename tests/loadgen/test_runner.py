"""The scheduler: open loop on deadlines, client queue under a cap, closed loop, bounds, stop."""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable

import numpy as np
import pytest

from infertriage.loadgen.client import ClientConfig, RequestClient
from infertriage.loadgen.runner import LoadPlan, WorkerReport, run_load, run_sync
from infertriage.loadgen.workers import split_plan
from infertriage.schemas import ErrorKind, RequestRecord
from infertriage.workload import Schedule, make_specs, parse_workload
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

FAST = Behavior(ttft_s=0.005, itl_s=0.002)


def _schedule(n: int, offsets: list[float] | None = None, output: int = 5) -> Schedule:
    specs = make_specs(parse_workload(f"synthetic:input=8,output={output}"), n)
    return Schedule(specs, None if offsets is None else np.asarray(offsets, dtype=float))


def _run(
    url: str,
    plan: LoadPlan,
    *,
    stop: Callable[[], bool] | None = None,
    **config: object,
) -> tuple[list[RequestRecord], WorkerReport]:
    records: list[RequestRecord] = []
    cfg = ClientConfig(base_url=url + "/v1", model="test-model", **config)  # type: ignore[arg-type]
    start = time.perf_counter_ns()
    report = run_sync(
        run_load(plan, cfg, clock_start_ns=start, load_start_ns=start + 20_000_000,
                 sink=records.append, stop=stop)
    )  # fmt: skip
    return records, report


def test_open_loop_sends_on_its_deadlines() -> None:
    offsets = [0.0, 0.05, 0.10, 0.15, 0.20, 0.25]
    with serve_in_thread(ServerConfig(behavior=FAST)) as (url, _):
        records, report = _run(url, LoadPlan(_schedule(6, offsets)))
    assert len(records) == 6 and all(r.ok for r in records) and report.num_records == 6
    by_index = sorted(records, key=lambda r: int(r.id.rsplit("-", 1)[1]))
    scheduled = np.asarray([r.scheduled_ts for r in by_index]) - by_index[0].scheduled_ts
    assert np.allclose(scheduled, offsets, atol=1e-6)  # intended starts are the deadlines
    lags = [r.dispatch_lag_s for r in by_index]
    # never early; late only by what a busy host adds (a generous bound: not a speed test)
    assert min(lags) >= 0.0 and max(lags) < 1.0
    sent = scheduled + np.asarray(lags)
    assert np.all(np.diff(sent) >= -1e-6)  # in the schedule's order
    assert report.loop_lag_s and report.cpu_s > 0 and not report.interrupted


def test_max_concurrency_reports_client_queue_time() -> None:
    slow = Behavior(ttft_s=0.1, itl_s=0.01)
    with serve_in_thread(ServerConfig(behavior=slow)) as (url, srv):
        records, _ = _run(url, LoadPlan(_schedule(6, [0.0] * 6), max_concurrency=2))
        assert srv.max_in_flight == 2
    queued = sorted(r.client_queue_s for r in records)
    assert queued[:2] == pytest.approx([0.0, 0.0], abs=0.01)
    assert queued[-1] > 0.2  # the last two waited for two requests ahead of them
    ttft_intended = sorted((r.first_token_ts or 0) - r.scheduled_ts for r in records)
    assert ttft_intended[-1] > ttft_intended[0] + 0.2  # never hidden: counted from the deadline


def test_closed_loop_keeps_its_concurrency_and_thinks() -> None:
    with serve_in_thread(ServerConfig(behavior=FAST)) as (url, srv):
        records, _ = _run(url, LoadPlan(_schedule(12), concurrency=3))
        assert srv.max_in_flight == 3
        t0 = time.monotonic()
        _run(url, LoadPlan(_schedule(4), concurrency=1, think_time_s=0.1))
        assert time.monotonic() - t0 >= 0.3  # three pauses between four requests
    assert len(records) == 12 and len({r.id for r in records}) == 12


def test_duration_stops_issuing_and_the_drain_deadline_cuts_stalls() -> None:
    stall = Behavior(ttft_s=0.01, itl_s=0.01, stall_after=1, stall_s=5.0)
    with serve_in_thread(ServerConfig(behavior=stall)) as (url, _):
        t0 = time.monotonic()
        plan = LoadPlan(_schedule(100, [0.05 * i for i in range(100)]), duration_s=0.3,
                        drain_timeout_s=0.3)  # fmt: skip
        records, _ = _run(url, plan)
        assert time.monotonic() - t0 < 2.0
    assert 4 <= len(records) <= 7
    assert {(r.error_kind, r.fault) for r in records} == {(ErrorKind.TIMEOUT, "run_deadline")}
    assert all(sum(c.num_tokens for c in r.chunks) == 1 for r in records)  # partial data kept


def test_stop_records_in_flight_requests_as_cancelled() -> None:
    slow = Behavior(ttft_s=0.01, itl_s=0.05)
    flag = {"stop": False}
    with serve_in_thread(ServerConfig(behavior=slow)) as (url, _):
        started = time.monotonic()

        def stop() -> bool:
            return time.monotonic() - started > 0.4

        records, report = _run(url, LoadPlan(_schedule(4, output=100), concurrency=4), stop=stop)
    assert report.interrupted and not flag["stop"]
    assert len(records) == 4
    assert all((r.error_kind, r.fault) == (ErrorKind.CLIENT, "cancelled") for r in records)
    assert all(len(r.chunks) >= 3 for r in records)


def test_faults_are_recorded_while_the_run_goes_on() -> None:
    config = ServerConfig(behavior=FAST, faults=((5, "reset"), (7, "http_503"), (9, "error")))
    with serve_in_thread(config) as (url, _):
        records, _ = _run(url, LoadPlan(_schedule(40), concurrency=4))
    assert len(records) == 40
    kinds = {(r.error_kind, r.fault) for r in records if not r.ok}
    assert kinds == {
        (ErrorKind.STREAM, "reset"),
        (ErrorKind.HTTP, "http_5xx"),
        (ErrorKind.STREAM, "error_event"),
    }
    faulty = sum(1 for k in range(40) if any(k % n == n - 1 for n in (5, 7, 9)))
    assert sum(not r.ok for r in records) == faulty


def test_split_plan_keeps_every_deadline_once() -> None:
    offsets = [0.1 * i for i in range(10)]
    plan = LoadPlan(_schedule(10, offsets), max_concurrency=5)
    shares = split_plan(plan, 3)
    merged = sorted(o for share in shares for o in share.schedule.offsets_s.tolist())  # type: ignore[union-attr]
    assert merged == pytest.approx(offsets)
    assert [s.max_concurrency for s in shares] == [2, 2, 1]
    closed = split_plan(LoadPlan(_schedule(10), concurrency=5), 2)
    assert [s.concurrency for s in closed] == [3, 2]
    assert sum(len(s.schedule) for s in closed) == 10


LONG = Behavior(ttft_s=0.01, itl_s=0.01, num_tokens=2000)  # a 20 s stream


def _settling(config: ServerConfig) -> list[RequestRecord]:
    """Ten requests at once, a 0.1 s level, a drain of 30 s that settles at 90 %."""
    plan = LoadPlan(_schedule(10, [0.0] * 10), duration_s=0.1, drain_timeout_s=30.0,
                    drain_settle_share=0.9)  # fmt: skip
    with serve_in_thread(config) as (url, _):
        records, _ = _run(url, plan)
    assert len(records) == 10
    return records


def _cut_long(records: list[RequestRecord]) -> RequestRecord:
    cut = [r for r in records if not r.ok]
    assert [(r.error_kind, r.fault) for r in cut] == [(ErrorKind.TIMEOUT, "run_deadline")]
    assert sum(c.num_tokens for c in cut[0].chunks) < 500  # cut within 5 s, not after 20
    return cut[0]


def test_a_settling_drain_waits_while_more_than_a_tenth_still_runs() -> None:
    # 8 of 10 done when the level ends, all past their first token: the drain waits for
    # the 1.5 s stream; then, 90 % done, the 20 s one gets the grace (1 s) and is cut
    longer = Behavior(ttft_s=0.01, itl_s=0.01, num_tokens=150)
    config = ServerConfig(behavior=FAST, presets={"long": LONG, "longer": longer},
                          faults=((10, "long"), (5, "longer")))  # fmt: skip
    records = _settling(config)
    _cut_long(records)
    assert max(r.output_tokens or 0 for r in records if r.ok) == 150


def test_a_settling_drain_waits_for_every_first_token() -> None:
    # 9 of 10 done when the level ends, but the last has no token yet: its TTFT is the
    # evidence, so the drain waits for it (1.5 s), then cuts the rest of its stream
    late = dataclasses.replace(LONG, ttft_s=1.5)
    records = _settling(ServerConfig(behavior=FAST, presets={"late": late}, faults=((10, "late"),)))
    cut = _cut_long(records)
    assert cut.first_token_ts is not None and cut.first_token_ts - cut.sent_ts >= 1.5


def test_a_settled_drain_cuts_no_stream_that_ends_within_its_grace() -> None:
    # 90 % done when the level ends; the last stream ends 0.5 s later, within the grace
    soon = Behavior(ttft_s=0.01, itl_s=0.01, num_tokens=50)
    records = _settling(ServerConfig(behavior=FAST, presets={"soon": soon}, faults=((10, "soon"),)))
    assert all(r.ok for r in records)
    assert max(r.output_tokens or 0 for r in records) == 50


def test_a_defect_of_the_client_fails_its_request_and_loses_no_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug of the client's own (here, an attribute an older aiohttp lacks) must not end a
    load task quietly: every request still gets its record, failed and saying why."""
    real_fetch = RequestClient.fetch

    async def buggy(
        self: RequestClient, state: object, request_id: str, body: bytes | None = None
    ) -> None:
        if request_id.endswith(("-1", "-3")):
            raise AttributeError("'ResponseHandler' object has no attribute 'closed'")
        await real_fetch(self, state, request_id, body)  # type: ignore[arg-type]

    monkeypatch.setattr(RequestClient, "fetch", buggy)
    with serve_in_thread(ServerConfig(behavior=FAST)) as (url, _):
        records, _ = _run(url, LoadPlan(_schedule(8), concurrency=2))
    assert len(records) == 8
    failed = sorted(r.id for r in records if not r.ok)
    assert len(failed) == 2 and all(f.endswith(("-1", "-3")) for f in failed)
    for record in records:
        if not record.ok:
            assert (record.error_kind, record.fault) == (ErrorKind.CLIENT, "internal_error")
            assert "has no attribute 'closed'" in (record.error_text or "")


def test_a_level_leaves_nothing_frozen() -> None:
    """The load freezes what it holds, so full passes do not delay stamps; afterwards
    everything is back in the collector's reach (garbage kept frozen would never be
    collected: a run directory's lock held in a cycle would stay claimed)."""
    gc.unfreeze()
    gc.freeze()  # as the console script does after its imports
    try:
        offsets = [0.0, 0.05, 0.10]
        with serve_in_thread(ServerConfig(behavior=FAST)) as (url, _):
            records, _ = _run(url, LoadPlan(_schedule(3, offsets)))
        assert len(records) == 3
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
