"""Synthetic closed-loop runs for the compare tests, and a run directory that holds one.

The statistics are the thing under test, not a server: runs are drawn from
seeded log-normal TTFTs and gaps, and written as a bench-like run directory
for the api and cli tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from infertriage.schemas import BenchRunInfo, Chunk, ErrorKind, JsonlWriter, RequestRecord, RunDir

LEVEL = {"level": "c=4"}


def ok_record(i: int, sent: float, times: np.ndarray, prompt: int) -> RequestRecord:
    chunks = tuple(Chunk(float(t), 1) for t in times)
    return RequestRecord(
        id=str(i),
        scheduled_ts=sent,
        sent_ts=sent,
        first_token_ts=chunks[0].ts,
        last_token_ts=chunks[-1].ts,
        end_ts=chunks[-1].ts,
        chunks=chunks,
        prompt_tokens=prompt,
        output_tokens=len(chunks),
        chunk_tokens_exact=True,
        labels=dict(LEVEL),
    )


def failure(i: int, sent: float, prompt: int) -> RequestRecord:
    """A request the server failed: HTTP 503 after 10 ms."""
    return RequestRecord(
        id=str(i),
        scheduled_ts=sent,
        sent_ts=sent,
        end_ts=sent + 0.01,
        prompt_tokens=prompt,
        error_kind=ErrorKind.HTTP,
        http_status=503,
        labels=dict(LEVEL),
    )


def closed_loop_run(
    n: int = 300,
    *,
    seed: int = 0,
    ttft: float = 1.0,
    tail: float = 1.0,
    itl: float = 1.0,
    prompt: float = 1.0,
    failed: int = 0,
    ttft_s: float = 0.2,
    concurrency: int = 4,
) -> list[RequestRecord]:
    """A closed-loop run: `concurrency` users, each sending when its last request ends.

    TTFT is log-normal around `ttft_s`, scaled by `ttft` (and every tenth request by
    `tail` too); 15–25 one-token chunks with log-normal 20 ms gaps scaled by `itl`;
    100–199 prompt tokens scaled by `prompt`; `failed` requests spread evenly fail.
    The same seed draws the same numbers whatever the scales.
    """
    rng = np.random.default_rng(seed)
    free = [0.0] * concurrency
    fail_every = n // failed if failed else 0
    records = []
    for i in range(n):
        sent = free[i % concurrency]
        scale = ttft * (tail if i % 10 == 0 else 1.0)
        first = sent + ttft_s * scale * rng.lognormal(0.0, 0.3)
        gaps = 0.02 * itl * rng.lognormal(0.0, 0.3, int(rng.integers(15, 26)) - 1)
        num_prompt = int(prompt * rng.integers(100, 200))
        if fail_every and i % fail_every == 0:
            record = failure(i, sent, num_prompt)
        else:
            times = first + np.concatenate(([0.0], np.cumsum(gaps)))
            record = ok_record(i, sent, times, num_prompt)
        assert record.end_ts is not None
        free[i % concurrency] = record.end_ts
        records.append(record)
    return records


def with_failures(records: Sequence[RequestRecord], num_failed: int) -> list[RequestRecord]:
    """`records` and then `num_failed` failures, sent 10 ms apart after the last of them."""
    start = max((r.end_ts or r.sent_ts for r in records), default=0.0)
    failures = [failure(len(records) + i, start + 0.01 * i, 150) for i in range(num_failed)]
    return [*records, *failures]


def write_run(root: Path, records: Sequence[RequestRecord]) -> Path:
    """A bench-like run directory holding `records`."""
    run = RunDir.create(root)
    run.write_info(BenchRunInfo(wall_anchor_s=0.0))
    with JsonlWriter(run.requests) as writer:
        for record in records:
            writer.write(record)
    return root
