"""Agentic sessions sent for real: each step after the previous one's answers and its delay,
fan-out children together, records labelled; the replica a header names; one twin run."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np
import pytest

from infertriage.analyze.signals.client import client_signals
from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.loadgen.client import ClientConfig
from infertriage.loadgen.load_engine import engine_kind
from infertriage.loadgen.response import REPLICA_HEADERS, StreamState, replica_of
from infertriage.loadgen.runner import LoadPlan, run_load, run_sync
from infertriage.loadgen.workers import split_plan
from infertriage.schemas import RequestRecord, UserError, read_jsonl
from infertriage.twin.process import TwinProcess
from infertriage.workload import ArrivalKind, Arrivals, Schedule, make_schedule, parse_workload
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

_AGENT = (
    "agentic:turns=3,input=8,output=4,system=16,tools=16,think=0.03,tool_share=0.4,"
    "tool_result=8,tool_latency=0.06,fanout=2,fanout_share=0.3"
)


def _sessions(count: int, rate: float | None = None) -> Schedule:
    arrivals = None if rate is None else Arrivals(ArrivalKind.CONSTANT, rate)
    return make_schedule(
        parse_workload(_AGENT), arrivals, num_requests=count, duration_s=None, seed=5
    )


def _send(plan: LoadPlan) -> list[RequestRecord]:
    records: list[RequestRecord] = []
    with serve_in_thread(ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))) as (url, _):
        cfg = ClientConfig(base_url=url + "/v1", model="test-model")
        start = time.perf_counter_ns()
        run_sync(
            run_load(plan, cfg, clock_start_ns=start, load_start_ns=start + 20_000_000,
                     sink=records.append)
        )  # fmt: skip
    return records


def _check_order(schedule: Schedule, records: list[RequestRecord]) -> None:
    assert schedule.sessions is not None and all(r.ok for r in records)
    by_index = {int(r.id.rsplit("-", 1)[1]): r for r in records}
    assert len(by_index) == len(schedule.specs)
    for session in schedule.sessions:
        for before, step in itertools.pairwise(session):
            answered = max(by_index[schedule.specs[i].index].end_ts or 0 for i in before.indices)
            sent = [by_index[schedule.specs[i].index] for i in step.indices]
            # never before the previous step's answers plus the step's delay
            assert min(r.scheduled_ts for r in sent) >= answered + step.delay_s
            assert len({r.scheduled_ts for r in sent}) == 1  # fan-out children go together
    labelled = [r for r in records if r.labels.get("step") == "fanout_child"]
    assert labelled and all("session" in r.labels and "turn" in r.labels for r in records)
    assert all(r.prompt_prefix and r.prompt_prefix[-1][1] > 32 for r in records)


def test_a_closed_loop_runs_each_session_step_by_step() -> None:
    schedule = _sessions(24)
    records = _send(LoadPlan(schedule, concurrency=3))
    _check_order(schedule, records)


def test_an_open_loop_starts_each_session_at_its_first_arrival() -> None:
    schedule = _sessions(16, rate=40.0)
    records = _send(LoadPlan(schedule))
    _check_order(schedule, records)
    assert schedule.sessions is not None and schedule.offsets_s is not None
    by_index = {int(r.id.rsplit("-", 1)[1]): r for r in records}
    starts = [by_index[s[0].indices[0]].scheduled_ts for s in schedule.sessions]
    planned = [schedule.offsets_s[s[0].indices[0]] for s in schedule.sessions]
    assert np.allclose(np.asarray(starts) - starts[0], np.asarray(planned) - planned[0])


def test_workers_split_whole_sessions() -> None:
    schedule = _sessions(40)
    shares = split_plan(LoadPlan(schedule, concurrency=4), 2)
    for share in shares:
        names = {s.labels[0][1] for s in share.schedule.specs}
        assert share.schedule.sessions is not None
        assert len(names) == len(share.schedule.sessions)
    assert sum(len(share.schedule) for share in shares) == 40


def test_the_replica_comes_from_a_header_and_stays_on_the_record() -> None:
    assert replica_of({"X-Served-By": "pod-a"}) is None  # a plain dict: names as given
    assert replica_of({"x-served-by": "pod-a", "x-replica": "b"}) == "pod-a"
    assert replica_of({}) is None and "x-served-by" in REPLICA_HEADERS
    schedule = _sessions(2)
    state = StreamState(schedule.specs[0], 0, chat=True)
    state.on_headers(1, 200, "text/event-stream", "", None, replica="pod-a")
    assert state.record("r-0", 0).labels["replica"] == "pod-a"
    plain = StreamState(schedule.specs[0], 0, chat=True)
    plain.on_headers(1, 200, "text/event-stream", "", None)
    assert "replica" not in plain.record("r-0", 0).labels


def test_locust_refuses_sessions() -> None:
    spec = BenchSpec(url="http://127.0.0.1:1", workload=_AGENT, locust_workers=1)
    with pytest.raises(UserError, match="cannot run agentic sessions"):
        engine_kind(spec)


def test_agentic_bench_on_the_twin_writes_sessions_and_the_reuse(tmp_path: Path) -> None:
    with TwinProcess("healthy", load_time_s=0.1) as twin:
        run_bench(
            BenchSpec(
                url=twin.url,
                workload=_AGENT,
                concurrencies=[4],
                num_requests=30,
                out=tmp_path / "run",
                check_tokens=False,
            )
        )
    lines = (tmp_path / "run" / "requests.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 30 and all(row["http_status"] == 200 for row in rows)
    assert all({"session", "turn", "step"} <= set(row["labels"]) for row in rows)
    assert any(row["labels"]["step"] == "fanout_child" for row in rows)
    records = list(read_jsonl(tmp_path / "run" / "requests.jsonl", RequestRecord))
    values = {s.name: s.value for s in client_signals(records, client_bound=False)}
    assert 0.3 < values["workload.prefix_reuse"] < 1.0  # histories repeat: most is reused
    assert values["workload.sessions"] >= 4
    assert "workload.replicas" not in values  # the twin names no replica
