"""The twin over real HTTP with several engines: data-parallel ranks and P/D instances.

One real-time test per layout (each a few seconds): the /metrics labels are vLLM V1's
(`engine`), with `engine_type` for P/D, and routing and the KV transfer behave as the
scenario says. Figures are read from the twin's own counters, not from wall time.
"""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from infertriage.twin.process import TwinProcess

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _complete(url: str, prompt: str, max_tokens: int) -> dict[str, object]:
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "stream": False}).encode()
    request = urllib.request.Request(
        f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        document: dict[str, object] = json.loads(response.read())
        return document


def _scrape(url: str) -> Series:
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        text = response.read().decode()
    series: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series[sample.name, frozenset(sample.labels.items())] = sample.value
    return series


def _metrics(url: str) -> Series:
    """The series right after the last response: the twin's /metrics waits for the engines'
    bookkeeping of every step whose outputs went out (`EngineDriver.settled`), so one scrape
    counts the last step (before it did, this missed it one run in ~10)."""
    return _scrape(url)


def _value(series: Series, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    found = [v for (n, ls), v in series.items() if n == name and wanted <= ls]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_round_robin_ranks_are_labelled_and_the_throttled_rank_queues(tmp_path: Path) -> None:
    scenario = _write(
        tmp_path,
        "engine: {max_num_seqs: 2}\n"
        "data_parallel: {size: 2, balancer: round_robin, rank_speed: [1.0, 0.2]}\n",
    )
    with TwinProcess(scenario, load_time_s=0.1) as twin:
        prompts = [f"request {i} " * 40 for i in range(8)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda p: _complete(twin.url, p, 24), prompts))
        series = _metrics(twin.url)
        dcgm = urllib.request.urlopen(f"{twin.url}/dcgm/metrics", timeout=30).read().decode()
    labels = {dict(ls).get("engine") for (n, ls) in series if n == "vllm:num_requests_running"}
    assert labels == {"0", "1"}
    info = {dict(ls).get("engine") for (n, ls) in series if n == "vllm:cache_config_info"}
    assert info == {"0", "1"}
    success = "vllm:request_success_total"
    # round robin: four each, whatever each rank's load
    for rank in ("0", "1"):
        assert _value(series, success, engine=rank, finished_reason="length") == 4
        assert _value(series, "vllm:generation_tokens_total", engine=rank) == 4 * 24
    # the rank at a fifth of the speed holds its requests longer, and they wait for its seats
    queue = "vllm:request_queue_time_seconds_sum"
    e2e = "vllm:e2e_request_latency_seconds_sum"
    assert _value(series, queue, engine="1") > _value(series, queue, engine="0")
    assert _value(series, e2e, engine="1") > 2 * _value(series, e2e, engine="0")
    assert dcgm.count("DCGM_FI_DEV_GPU_UTIL{") == 2  # one GPU per rank


def test_prefill_decode_moves_the_kv_and_decode_does_not_recompute(tmp_path: Path) -> None:
    scenario = _write(
        tmp_path,
        "disaggregation: {prefill_instances: 1, decode_instances: 1, link_gb_s: 0.5,"
        " link_latency_ms: 1.0, transfer_setup_ms: 1.0}\n",
    )
    num_requests, max_tokens = 3, 8
    with TwinProcess(scenario, load_time_s=0.1) as twin:
        usages = [
            _complete(twin.url, f"disaggregated {i} " * 256, max_tokens)["usage"]
            for i in range(num_requests)
        ]
        series = _metrics(twin.url)
    prompt_tokens = [int(u["prompt_tokens"]) for u in usages]  # type: ignore[index]
    assert all(int(u["completion_tokens"]) == max_tokens for u in usages)  # type: ignore[index]
    decode = {"engine": "0", "engine_type": "decode"}
    prefill = {"engine": "0", "engine_type": "prefill"}
    roles = {dict(ls).get("engine_type") for (n, ls) in series if n == "vllm:num_requests_running"}
    assert roles == {"prefill", "decode"}
    # each prompt token's KV (Llama-3.1-8B bf16: 128 KiB) crossed the link once
    moved = _value(series, "vllm:nixl_bytes_transferred_sum", **decode)
    assert moved == sum(prompt_tokens) * 131072
    assert _value(series, "vllm:nixl_bytes_transferred_count", **decode) == num_requests
    assert _value(series, "vllm:nixl_num_failed_transfers_total", **decode) == 0
    # one at a time: each transfer is its bytes over 0.5 GB/s plus the link's 1 ms
    xfer_s = _value(series, "vllm:nixl_xfer_time_seconds_sum", **decode)
    assert abs(xfer_s - (moved / 0.5e9 + num_requests * 0.001)) < 1e-6
    # the decode instance's TTFT counts the transfer; the prefill instance's does not
    ttft = "vllm:time_to_first_token_seconds_sum"
    assert _value(series, ttft, **decode) > xfer_s
    # prefill ran each prompt once (max_tokens 1); decode looked up nothing, computed one
    # token per output token (the prompt's last and then its own)
    assert _value(series, "vllm:generation_tokens_total", **prefill) == num_requests
    assert _value(series, "vllm:prefix_cache_queries_total", **decode) == 0
    steps = _value(series, "vllm:iteration_tokens_total_sum", **decode)
    assert steps == num_requests * max_tokens
