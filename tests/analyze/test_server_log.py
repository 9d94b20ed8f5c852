"""A server's log read for the diagnosis: stats lines, preemptions, OOM, recompiles, the window.

The log lines are written here by hand in the formats of vLLM's stat loggers
(V1 `Engine 000: …` with and without the process prefix, V0 `… Pending: …`
with its preemption warning) and of SGLang's scheduler (`Decode batch.` /
`Prefill batch.`), with the stamps each prints.
"""

from __future__ import annotations

import time

import pytest

from infertriage.analyze.server_log import log_signals, merge_log_signals, parse_server_log
from infertriage.schemas import Signal

_V1 = (
    "(APIServer pid=41) INFO 12-02 16:31:{s:02d} [loggers.py:123] Engine 000: Avg prompt "
    "throughput: 812.3 tokens/s, Avg generation throughput: 95.0 tokens/s, Running: {run} reqs, "
    "Waiting: {wait} reqs, GPU KV cache usage: {kv}%, Prefix cache hit rate: 12.5%"
)


def _unix(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%d %H:%M:%S"))


def test_vllm_v1_stats_lines_give_the_peaks_within_the_window() -> None:
    lines = [
        _V1.format(s=5, run=2, wait=0, kv="99.0"),  # before the run: left out
        _V1.format(s=20, run=16, wait=7, kv="81.5"),
        _V1.format(s=30, run=12, wait=30, kv="64.0"),
        "INFO 12-02 16:31:31 [serving.py:9] a line without figures",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",  # undated: kept
    ]
    window = (_unix("2026-12-02 16:31:15"), _unix("2026-12-02 16:31:40"))
    log = parse_server_log("\n".join(lines), window)
    assert log.engine == "vllm" and log.num_stats_lines == 2
    assert log.kv_usage_max == pytest.approx(0.815)
    assert (log.running_max, log.waiting_max) == (16.0, 30.0)
    assert log.oom_errors == 1
    names = {s.name: s.value for s in log_signals(log)}
    assert names["kv.usage_max"] == pytest.approx(0.815)
    assert names["log.oom_errors"] == 1
    # V1 logs no preemptions: its silence is not a zero
    assert "preemptions.total" not in names
    everything = parse_server_log("\n".join(lines))
    assert everything.kv_usage_max == pytest.approx(0.99)


def test_vllm_v0_preemption_warnings_count_with_their_cumulative_total() -> None:
    lines = [
        "INFO 03-04 10:00:01 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 210.4 tokens/s, Running: 64 reqs, Swapped: 0 reqs, Pending: 12 reqs, GPU KV "
        "cache usage: 99.2%, CPU KV cache usage: 0.0%.",
        *(
            f"WARNING 03-04 10:00:0{i} scheduler.py:1057 Sequence group {i} is preempted by "
            "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can "
            f"affect the end-to-end performance. total_num_cumulative_preemption={50 + i * 10}"
            for i in range(1, 4)
        ),
    ]
    log = parse_server_log("\n".join(lines))
    assert log.engine == "vllm-v0"
    # three warnings logged, but the counter says 21 happened (vLLM logs every 50th)
    assert log.preemptions == 21
    assert {s.name: s.value for s in log_signals(log)}["preemptions.total"] == 21


def test_sglang_batch_lines_and_recompiles() -> None:
    text = "\n".join(
        [
            "[2026-12-02 16:31:20] Prefill batch. #new-seq: 4, #new-token: 2048, #cached-token: 0, "
            "token usage: 0.31, #running-req: 8, #queue-req: 120",
            "[2026-12-02 16:31:21 TP0] Decode batch. #running-req: 12, #token: 9000, token usage: "
            "0.42, cuda graph: True, gen throughput (token/s): 455.10, #queue-req: 2826",
            "V1202 16:31:22.1 torch/_dynamo/guards.py:2] [0/1] [__recompiles] Recompiling function "
            "forward in /srv/model.py:120",
        ]
    )
    log = parse_server_log(text)
    assert log.engine == "sglang"
    assert (log.kv_usage_max, log.running_max, log.waiting_max) == (0.42, 12.0, 2826.0)
    assert log.recompiles.recompilations == 1


def test_the_log_fills_in_and_never_replaces_a_scraped_figure() -> None:
    scraped = [Signal("kv.usage_max", 0.5, "fraction", "metrics")]
    from_log = [
        Signal("kv.usage_max", 0.9, "fraction", "log"),
        Signal("queue.waiting_max", 30.0, "requests", "log"),
        Signal("trace.recompilations", 4.0, "1", "log"),
    ]
    traced = [*scraped, Signal("trace.recompilations", 1.0, "1", "trace")]
    merged = {s.name: s for s in merge_log_signals(traced, from_log)}
    assert merged["kv.usage_max"].source == "metrics"
    assert merged["queue.waiting_max"].value == 30.0
    assert merged["trace.recompilations"].value == 4.0  # a count: the larger wins
