"""The client's signals: throughput over the steady window, with a closed loop's first burst."""

from __future__ import annotations

import pytest

from infertriage.analyze.client_signals import client_signals
from infertriage.schemas import Chunk, ErrorKind, RequestRecord


def _stream(
    rid: str, sent: float, tokens: int, *, cut: bool = False, itl: float = 0.01
) -> RequestRecord:
    chunks = tuple(Chunk(sent + 0.02 + i * itl, 1) for i in range(tokens))
    end = chunks[-1].ts
    return RequestRecord(
        id=rid, scheduled_ts=sent, sent_ts=sent, first_token_ts=chunks[0].ts,
        last_token_ts=end, end_ts=end, chunks=chunks, prompt_tokens=100,
        output_tokens=tokens, http_status=200,
        error_kind=ErrorKind.TIMEOUT if cut else ErrorKind.NONE,
        fault="run_deadline" if cut else "",
    )  # fmt: skip


def test_throughput_counts_the_first_bursts_tokens_inside_the_window() -> None:
    # four streams of 100-130 tokens at 10 ms each from t=0 (the burst), each followed by two
    # more; the last wave is cut by the client's deadline: 400 tokens a second throughout
    waves = [[_stream(f"w0-{i}", i * 0.001, 100 + 10 * i) for i in range(4)]]
    for k in (1, 2):
        cut = k == 2
        waves.append(
            [_stream(f"w{k}-{i}", r.end_ts or 0.0, 100, cut=cut) for i, r in enumerate(waves[-1])]
        )
    first, second = waves[0], waves[1] + waves[2]
    signals = {s.name: s for s in client_signals(first + second, client_bound=False)}
    throughput = signals["client.throughput_tok_s"]
    assert throughput.window is not None and throughput.window[0] > 0.5  # after the burst began
    assert throughput.value == pytest.approx(400.0, rel=0.05)
