"""Writes the hand-made `/metrics` dumps of this folder (see README.md): `python make_dumps.py`.

The names and labels are the engines' own (vLLM V1 `vllm/v1/metrics/loggers.py`: labels
`model_name` and `engine`, one engine per data-parallel rank; SGLang
`python/sglang/srt/metrics/collector.py`: the scheduler's labels `model_name`,
`engine_type`, `tp_rank`, `pp_rank`, `moe_ep_rank` and, with `--dp-size`, `dp_rank`);
every value is made up to show one case.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
Buckets = tuple[tuple[str, float], ...]


def _family(name: str, kind: str, doc: str) -> list[str]:
    return [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]


def _vllm(name: str, value: float, **labels: str) -> str:
    every = {**labels, "model_name": MODEL}
    text = ",".join(f'{k}="{v}"' for k, v in sorted(every.items()))
    return f"{name}{{{text}}} {value}"


def _hist(name: str, engine: str, buckets: Buckets, total: float, count: float | None) -> list[str]:
    lines = [_vllm(f"{name}_bucket", c, engine=engine, le=le) for le, c in buckets]
    lines.append(_vllm(f"{name}_count", buckets[-1][1] if count is None else count, engine=engine))
    lines.append(_vllm(f"{name}_sum", total, engine=engine))
    return lines


def vllm_dp2(
    running: tuple[float, float],
    waiting: tuple[float, float],
    kv: tuple[float, float],
    ttft: tuple[tuple[Buckets, float], tuple[Buckets, float]],
) -> str:
    """A vLLM V1 server with `--data-parallel-size 2`: every series once per engine."""
    engines = ("0", "1")
    out = _family(
        "vllm:num_requests_running", "gauge", "Number of requests in model execution batches."
    )
    out += [_vllm("vllm:num_requests_running", running[i], engine=e) for i, e in enumerate(engines)]
    out += _family(
        "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."
    )
    out += [_vllm("vllm:num_requests_waiting", waiting[i], engine=e) for i, e in enumerate(engines)]
    out += _family(
        "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."
    )
    out += [_vllm("vllm:kv_cache_usage_perc", kv[i], engine=e) for i, e in enumerate(engines)]
    out += _family(
        "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine."
    )
    out += [_vllm("vllm:num_preemptions_total", 0.0, engine=e) for e in engines]
    out += _family(
        "vllm:time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
    )
    for i, e in enumerate(engines):
        out += _hist("vllm:time_to_first_token_seconds", e, ttft[i][0], ttft[i][1], None)
    return "\n".join(out) + "\n"


SKEWED = vllm_dp2(
    running=(64.0, 2.0),
    waiting=(30.0, 0.0),
    kv=(0.97, 0.05),
    ttft=(
        ((("0.1", 10.0), ("0.5", 80.0), ("1.0", 300.0), ("5.0", 1400.0), ("+Inf", 1500.0)), 2710.5),
        ((("0.1", 60.0), ("0.5", 70.0), ("1.0", 71.0), ("5.0", 71.0), ("+Inf", 71.0)), 7.9),
    ),
)
BALANCED = vllm_dp2(
    running=(33.0, 33.0),
    waiting=(0.0, 0.0),
    kv=(0.41, 0.39),
    ttft=(
        ((("0.1", 500.0), ("0.5", 700.0), ("1.0", 710.0), ("5.0", 712.0), ("+Inf", 712.0)), 80.2),
        ((("0.1", 490.0), ("0.5", 701.0), ("1.0", 707.0), ("5.0", 709.0), ("+Inf", 709.0)), 79.0),
    ),
)


def pasted_cut(text: str) -> str:
    """As a chat or a terminal gives it back: indented, Windows line ends, cut mid-line
    inside the last histogram (engine 1's `+Inf` bucket)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if 'engine="1",le="+Inf"' in line)
    return "".join(f"    {line}\r\n" for line in lines[:at]) + "    " + lines[at][:60]


def pid_copies() -> str:
    """vLLM with `--api-server-count 3`, gauges without `mostrecent`: one series per pid."""
    pids = ("2711", "2712", "2713")
    out = _family(
        "vllm:num_requests_running", "gauge", "Number of requests in model execution batches."
    )
    out += [_vllm("vllm:num_requests_running", 12.0, engine="0", pid=p) for p in pids]
    out += _family(
        "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."
    )
    out += [_vllm("vllm:num_requests_waiting", 4.0, engine="0", pid=p) for p in pids]
    out += _family(
        "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."
    )
    out += [_vllm("vllm:kv_cache_usage_perc", 0.52, engine="0", pid=p) for p in pids]
    out += _family(
        "vllm:request_success_total", "counter", "Count of successfully processed requests."
    )
    out += [
        _vllm("vllm:request_success_total", v, engine="0", finished_reason="stop", pid=p)
        for p, v in zip(pids, (310.0, 298.0, 305.0), strict=True)
    ]
    return "\n".join(out) + "\n"


def impossible() -> str:
    """One vLLM engine whose exporter says what no engine state can be."""
    out = _family(
        "vllm:num_requests_running", "gauge", "Number of requests in model execution batches."
    )
    out.append(_vllm("vllm:num_requests_running", 7.0, engine="0"))
    out += _family(
        "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."
    )
    out.append(_vllm("vllm:num_requests_waiting", -3.0, engine="0"))
    out += _family(
        "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."
    )
    out.append(_vllm("vllm:kv_cache_usage_perc", 97.0, engine="0"))
    out += _family(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
    )
    out.append(_vllm("vllm:prefix_cache_queries_total", 50000.0, engine="0"))
    out += _family(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
    )
    out.append(_vllm("vllm:prefix_cache_hits_total", 61000.0, engine="0"))
    out += _family(
        "vllm:time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
    )
    buckets = (("0.1", 40.0), ("0.5", 100.0), ("1.0", 110.0), ("+Inf", 118.0))
    out += _hist("vllm:time_to_first_token_seconds", "0", buckets, 51.2, 120.0)
    return "\n".join(out) + "\n"


def sglang_dp2_tp_copies() -> str:
    """SGLang `--dp-size 2 --tp-size 2 --enable-metrics-for-all-schedulers`: each DP rank's
    scheduler state exported by both of its TP ranks."""
    model = "Qwen/Qwen2.5-7B-Instruct"

    def line(name: str, dp: int, tp: int, value: float) -> str:
        return (
            f'{name}{{dp_rank="{dp}",engine_type="unified",model_name="{model}",'
            f'moe_ep_rank="{tp}",pp_rank="0",tp_rank="{tp}"}} {value}'
        )

    out: list[str] = []
    for name, doc, values in (
        ("sglang:num_running_reqs", "The number of running requests.", (3.0, 96.0)),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", (0.0, 40.0)),
        ("sglang:token_usage", "The token usage.", (0.04, 0.93)),
    ):
        out += _family(name, "gauge", doc)
        out += [line(name, dp, tp, values[dp]) for dp in (0, 1) for tp in (0, 1)]
    out += _family("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.")
    out += [
        line("sglang:prompt_tokens_total", dp, tp, v)
        for dp, v in ((0, 10422.0), (1, 803311.0))
        for tp in (0, 1)
    ]
    return "\n".join(out) + "\n"


DUMPS = {
    "vllm_dp2_one_rank_queues.txt": SKEWED,
    "vllm_dp2_balanced.txt": BALANCED,
    "vllm_pasted_cut.txt": pasted_cut(SKEWED),
    "vllm_api_server_pid_copies.txt": pid_copies(),
    "vllm_impossible_values.txt": impossible(),
    "sglang_dp2_tp_copies.txt": sglang_dp2_tp_copies(),
}

if __name__ == "__main__":
    for name, text in DUMPS.items():
        (HERE / name).write_text(text, encoding="utf-8", newline="")
