"""vLLM's and SGLang's log lines beyond their stats lines: start-up configuration, limits,
refusals, retractions, aborts, data-parallel ranks. Each line is quoted from the engine's
source (the format string, numbers filled in here) or from a public log, cited beside it.
"""

from __future__ import annotations

from infertriage.engines import SGLANG, VLLM, EventKind, LogEvent, LogFormat


def _events(form: LogFormat | None, line: str) -> tuple[LogEvent, ...]:
    assert form is not None and form.read_events is not None
    return form.read_events(line)


def _config(form: LogFormat | None, line: str) -> dict[str, float]:
    (event,) = _events(form, line)
    assert event.kind is EventKind.CONFIG
    return dict(event.values)


def test_vllm_kv_cache_size_and_concurrency() -> None:
    # vllm/v1/core/kv_cache_utils.py (0.8–0.11) `logger.info("GPU KV cache size: %s tokens")`;
    # the line as pasted in vllm-project/vllm#14462 (0.7.4.dev, 03-07 22:50:53)
    line = "INFO 03-07 22:50:53 [kv_cache_utils.py:537] GPU KV cache size: 249,584 tokens"
    assert _config(VLLM.log, line) == {"kv_cache_tokens": 249584.0}
    # the same file: "Maximum concurrency for %s tokens per request: %.2fx"
    line = (
        "INFO 05-01 10:00:00 [kv_cache_utils.py:540] Maximum concurrency for 32,768 tokens "
        "per request: 0.44x"
    )
    assert _config(VLLM.log, line) == {"max_model_len": 32768.0, "kv_cache_tokens": 14418.0}


def test_vllm_v0_blocks_and_engine_config() -> None:
    # vllm/executor/executor_base.py (0.4–0.6) "# %s blocks: %d, # CPU blocks: %d", as pasted
    # in vllm-project/vllm#1494
    line = "INFO 10-31 15:40:52 llm_engine.py:207] # GPU blocks: 127960, # CPU blocks: 7281"
    assert _config(VLLM.log, line) == {"num_gpu_blocks": 127960.0}
    # vllm/v1/engine/core.py "Initializing a V1 LLM engine (v%s) with config: %s" (0.8+)
    line = (
        "INFO 05-01 10:00:00 [core.py:61] Initializing a V1 LLM engine (v0.9.1) with config: "
        "model='x', max_seq_len=4096, download_dir=None, tensor_parallel_size=2, "
        "pipeline_parallel_size=1, enforce_eager=False, kv_cache_dtype=auto"
    )
    assert _config(VLLM.log, line) == {
        "max_model_len": 4096.0, "tensor_parallel": 2.0, "pipeline_parallel": 1.0,
        "cuda_graphs": 1.0,
    }  # fmt: skip
    # vllm/entrypoints/openai/api_server.py (0.10+) `logger.info("non-default args: %s", …)`
    line = (
        "(APIServer pid=1) INFO 05-01 10:00:00 [api_server.py:1805] non-default args: "
        "{'model': 'x', 'max_num_seqs': 8, 'gpu_memory_utilization': 0.95}"
    )
    assert _config(VLLM.log, line) == {"max_num_seqs": 8.0, "gpu_memory_utilization": 0.95}


def test_vllm_limits_refusals_and_aborts() -> None:
    # vllm/core/scheduler.py (V0) "Input prompt (%d tokens) is too long and exceeds limit of
    # %d", as pasted in vllm-project/vllm#13370 (0.7.x)
    line = (
        "WARNING 02-16 15:37:32 scheduler.py:947] Input prompt (2501 tokens) is too long and "
        "exceeds limit of 2048"
    )
    (event,) = _events(VLLM.log, line)
    assert event.kind is EventKind.REJECTED and event.values == {
        "prompt_tokens": 2501.0, "limit": 2048.0
    }  # fmt: skip
    # vllm/worker/worker.py raise_if_cache_size_invalid, as pasted in vllm-project/vllm#7526
    line = (
        "ValueError: The model's max seq len (30000) is larger than the maximum number of "
        "tokens that can be stored in KV cache (3984). Try increasing `gpu_memory_utilization`"
    )
    assert _config(VLLM.log, line) == {
        "max_model_len": 30000.0, "kv_cache_short": 1.0, "kv_cache_tokens": 3984.0
    }  # fmt: skip
    # vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory, as pasted in
    # vllm-project/vllm#14376
    line = (
        "ERROR 03-05 13:46:50 core.py:291] ValueError: No available memory for the cache "
        "blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
    )
    assert _config(VLLM.log, line) == {"kv_cache_short": 1.0}
    # vllm/engine/async_llm_engine.py `logger.info("Aborted request %s.", request_id)`, as
    # pasted in vllm-project/vllm#2484 (id shortened)
    line = "INFO 01-17 03:11:25 async_llm_engine.py:134] Aborted request 0e89f1d2d94c4a039f86."
    assert [e.kind for e in _events(VLLM.log, line)] == [EventKind.ABORTED]


def test_vllm_lines_it_knows_are_recognised() -> None:
    assert VLLM.log is not None and VLLM.log.recognises is not None
    # an ordinary vLLM record, and LMCache's connector (LMCache/LMCache#1109's paste)
    assert VLLM.log.recognises.search(
        "INFO 12-02 16:31:45 [api_server.py:1 ] Starting vLLM API server 0 on http://0.0.0.0:8000"
    )
    assert VLLM.log.recognises.search(
        "[2025-07-21 22:01:18,140] LMCache INFO: Reqid: chatcmpl-52ac, Total tokens 15444, "
        "LMCache hit tokens: 15444, need to load: 3"
    )
    assert not VLLM.log.recognises.search("some other program's line")


def test_vllm_spec_line_wrapped_by_a_paste() -> None:
    # vllm/v1/spec_decode/metrics.py (0.9+), its tail on a line of its own as a paste wrapped
    # it (vllm-project/vllm#41834, tests/data/incidents/vllm/009)
    assert VLLM.log is not None and VLLM.log.read_spec is not None
    spec = VLLM.log.read_spec("0.181, 0.067, 0.039, 0.014, Avg Draft acceptance rate: 4.4%")
    assert spec is not None and spec.acceptance_rate is not None
    assert abs(spec.acceptance_rate - 0.044) < 1e-12


def test_vllm_v0_speculative_metrics_state_a_fraction() -> None:
    # vllm/spec_decode/metrics.py (V0, 0.4–0.6) "Speculative metrics: Draft acceptance rate:
    # {:.3f}, System efficiency: {:.3f}, …" (figures filled in here)
    assert VLLM.log is not None and VLLM.log.read_spec is not None
    spec = VLLM.log.read_spec(
        "INFO 06-01 10:00:00 metrics.py:341] Speculative metrics: Draft acceptance rate: 0.651, "
        "System efficiency: 0.412, Number of speculative tokens: 5"
    )
    assert spec is not None and spec.acceptance_rate == 0.651


def _sglang_acceptance(length: str, rate: str) -> float | None:
    # scheduler_metrics_mixin.py's decode line with speculative decoding (figures filled in)
    assert SGLANG.log is not None and SGLANG.log.read_spec is not None
    spec = SGLANG.log.read_spec(
        "[2025-12-04 20:35:53] Decode batch, #running-req: 48, #token: 3894, token usage: 0.05, "
        f"accept len: {length}, accept rate: {rate}, cuda graph: True, gen throughput "
        "(token/s): 5452.63, #queue-req: 0, "
    )
    assert spec is not None
    return spec.acceptance_rate


def test_sglang_accept_rate_is_read_as_the_share_of_drafts_accepted() -> None:
    # two meanings under one wording: sgl-project/sglang@01bb3c8 divides accept len (the bonus
    # token counted) by speculative_num_draft_tokens, later builds the drafts accepted by the
    # drafts made ((len - 1) / (n - 1)), vLLM's meaning
    assert _sglang_acceptance("1.00", "0.11") == 0.0  # no draft accepted (n = 9), in both
    assert _sglang_acceptance("1.00", "0.00") == 0.0
    # the older meaning at n = 4 and a true 30 %: 1.9 / 4 prints 0.47 or 0.48 (4 drafts is
    # the only whole number that fits, the newer meaning fits none)
    for printed in ("0.47", "0.48"):
        found = _sglang_acceptance("1.90", printed)
        assert found is not None and abs(found - 0.3) < 1e-9
    # the newer meaning at n = 4 and 30 %: read as printed
    assert _sglang_acceptance("1.90", "0.30") == 0.3
    # both meanings fit a whole number (4 or 3 draft tokens): read as printed
    assert _sglang_acceptance("2.00", "0.50") == 0.5
    assert _sglang_acceptance("2.31", "0.44") == 0.44  # neither fits: as printed
    assert SGLANG.log is not None and SGLANG.log.read_spec is not None
    spec = SGLANG.log.read_spec("Decode batch. #running-req: 8, accept len: 2.10, gen throughput")
    assert spec is not None and spec.acceptance_rate is None  # no rate printed: none made up


def test_sglang_retraction_and_startup() -> None:
    # python/sglang/srt/managers/scheduler.py (0.4+) "KV cache pool is full. Retract requests.
    # #retracted_reqs: {}, #new_token_ratio: {:.4f} -> {:.4f}"
    line = (
        "[2025-06-01 10:00:02 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
        "#new_token_ratio: 0.7000 -> 1.0000"
    )
    (event,) = _events(SGLANG.log, line)
    assert event.kind is EventKind.PREEMPTED and event.values == {"count": 3.0}
    # scheduler.py's start-up line (0.3–0.5) "max_total_num_tokens={}, chunked_prefill_size={},
    # max_prefill_tokens={}, max_running_requests={}, context_len={}"
    line = (
        "[2025-06-01 10:00:02 TP0] max_total_num_tokens=1234567, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=4096, context_len=32768"
    )
    assert _config(SGLANG.log, line) == {
        "kv_cache_tokens": 1234567.0, "max_num_batched_tokens": 8192.0,
        "max_num_seqs": 4096.0, "max_model_len": 32768.0,
    }  # fmt: skip


def test_sglang_dp_attention_ranks_are_apart() -> None:
    # the prefix of a DP-attention scheduler (sgl-project/sglang#6081's paste, 2025-05-13)
    assert SGLANG.log is not None
    line = (
        "[2025-05-13 01:57:33 DP1 TP1] Decode batch. #running-req: 8, #token: 29915, "
        "token usage: 0.22, accept len: 1.55, gen throughput (token/s): 61.31, #queue-req: 0"
    )
    stats = SGLANG.log.read_stats(line)
    assert stats is not None and stats.engine_index == 1 and stats.running == 8
    # a stamp that names its zone is not SGLang's (TGI's router writes UTC with a Z)
    assert (
        SGLANG.log.read_stamp("2024-05-01T06:49:51.437631Z  INFO text_generation_router", 0) is None
    )
    assert SGLANG.log.read_stamp("[2025-05-13 01:57:33 DP1 TP1] Decode batch.", 0) == (
        "2025-05-13 01:57:33"
    )
