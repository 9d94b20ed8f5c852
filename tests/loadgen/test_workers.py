"""`--workers N`: one schedule split over processes, records merged into one run."""

from __future__ import annotations

import asyncio
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.loadgen.workers import RecordBatch, pack_record, unpack_record
from infertriage.schemas import ErrorKind, RequestRecord, RunDir
from infertriage.schemas.records import Chunk, TokenSource
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


def test_a_record_sent_to_the_parent_as_a_row_comes_back_equal() -> None:
    record = RequestRecord(
        id="r-7",
        scheduled_ts=1.0,
        sent_ts=1.25,
        first_token_ts=1.5,
        last_token_ts=1.75,
        end_ts=2.0,
        chunks=(Chunk(1.5, 1), Chunk(1.75, 2, reasoning=True)),
        prompt_tokens=16,
        output_tokens=3,
        prompt_tokens_source=TokenSource.USAGE,
        http_status=200,
        error_kind=ErrorKind.TIMEOUT,
        error_text="cut",
        labels={"level": "1"},
        client_queue_s=0.125,
        max_tokens=4,
        headers_ts=1.375,
        chunk_tokens_exact=True,
        fault="stall",
        server_request_id="chatcmpl-r-7",
        prompt_prefix=(("ab", 8), ("cd", 16)),
        trace_id="0af7651916cd43dd8448eb211c80319c",
    )
    row = pickle.loads(pickle.dumps(pack_record(record)))  # as the queue carries it
    back = unpack_record(row)
    assert back == record and isinstance(back.chunks[1], Chunk)


def test_a_worker_sends_full_batches_at_once_and_a_lone_record_after_its_wait() -> None:
    sent: list[tuple[str, list[list[object]]]] = []

    class Queue:
        def put(self, item: tuple[str, list[list[object]]]) -> None:
            sent.append(item)

    record = RequestRecord(id="r", scheduled_ts=1.0, sent_ts=1.0)

    async def load() -> None:
        batch = RecordBatch(Queue())
        batch.add(record)
        assert sent == []  # waits for more
        await asyncio.sleep(0.5)  # well past the batch's wait
        assert [(kind, [unpack_record(row) for row in rows]) for kind, rows in sent] == [
            ("records", [record])
        ]
        many = [replace(record, id=f"r-{n}") for n in range(256)]
        for one in many:
            batch.add(one)
        assert [unpack_record(row) for row in sent[1][1]] == many  # full: sent at once
        batch.add(record)
        batch.flush()  # the level's end
        assert len(sent) == 3 and len(sent[2][1]) == 1

    asyncio.run(load())
