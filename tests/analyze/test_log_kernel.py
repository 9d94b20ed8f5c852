"""The kernel layer read from a server's own log: decode steps outside CUDA graphs, graphs off
at start-up, and the flash-attention kernel left at start-up.

Every excerpt is written here, in the engines' own wordings, with numbers chosen here:
- SGLang's decode stats line: python/sglang/srt/managers/scheduler.py /
  scheduler_metrics_mixin.py (0.4–0.5) "Decode batch. #running-req: N, #token: T, token usage:
  U, cuda graph: True|False, gen throughput (token/s): G, #queue-req: Q", stamped
  "[YYYY-MM-DD HH:MM:SS TP0]" (the format `engines.sglang` documents);
- vLLM's attention selector: vllm/attention/selector.py `which_attn_to_use` (commit 68941ee0):
  "Cannot use FlashAttention-2 backend for Volta and Turing GPUs." then "Using XFormers
  backend." (its other reasons, "… for FP8 KV cache.", "… for head size %d."); V1's
  vllm/attention/utils/fa_utils.py (commit 4d5ee6c6) "Cannot use FA version %d is not supported
  due to %s"; and vllm/v1/engine/core.py's "Initializing a V1 LLM engine (v%s) with config: %s";
- TGI's flash import: server/text_generation_server/utils/flash_attn.py (commit 00e0d2d7)
  "GPU with CUDA capability {major} {minor} is not supported" and models/__init__.py
  "Could not import Flash Attention enabled models: {e}", as TGI's launcher prints a shard's
  warning ("… WARN shard-manager: text_generation_launcher: …").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from infertriage.analyze.logs import read_records, summarise_events
from infertriage.analyze.server_log import log_signals, parse_server_log
from infertriage.api.logs import LogTriage, triage_logs
from infertriage.api.specs import LogsSpec
from infertriage.engines import TGI, VLLM, AttentionFallback, EventKind
from infertriage.schemas import Layer, Status

_DECODE = (
    "[2026-03-02 10:00:{s:02d} TP0] Decode batch. #running-req: {run}, #token: {tok}, "
    "token usage: 0.{use:02d}, cuda graph: {graph}, gen throughput (token/s): {gen:.2f}, "
    "#queue-req: 0"
)


def _unix(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%d %H:%M:%S"))


def _decode(s: int, run: int, graph: bool, gen: float) -> str:
    return _DECODE.format(s=s, run=run, tok=run * 300, use=run % 90, graph=graph, gen=gen)


def _triage(tmp_path: Path, lines: list[str], name: str = "server.log") -> LogTriage:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return triage_logs(LogsSpec(files=(path,)))


def _kernel(triage: LogTriage) -> dict[str, Status]:
    return {f.id: f.status for f in triage.diagnosis.layer(Layer.KERNEL).findings}


def test_sglang_decode_outside_graphs_with_no_symptom_is_a_warning(tmp_path: Path) -> None:
    # 32 requests at ~2,900 tokens/s: a token every 11 ms per request, every step eager; a
    # log says no SLO, and short steps alone are no symptom (a healthy run may warn, never
    # name a bottleneck)
    lines = [_decode(s, 32, False, 2900.0 + s) for s in range(0, 40, 4)]
    triage = _triage(tmp_path, lines)
    graphs = triage.timeline.graph_use
    assert graphs is not None and graphs.num_lines == 10 and graphs.eager_share == 1.0
    assert graphs.eager_batch == 32.0 and graphs.num_eager == 10 and not graphs.ranked
    assert graphs.eager_token_s == pytest.approx(32 / 2916.0, rel=0.01)
    assert graphs.eager_step_s == graphs.eager_token_s  # no speculative decoding
    assert triage.diagnosis.primary is None
    assert _kernel(triage) == {"kernel.eager_decode": Status.WARNING}
    (finding,) = triage.diagnosis.layer(Layer.KERNEL).findings
    assert "100% of the decode steps ran outside CUDA graphs at 32 requests" in finding.title
    assert any("--cuda-graph-max-bs" in step for step in finding.next_steps)


def test_a_few_eager_steps_among_graph_steps_are_no_finding(tmp_path: Path) -> None:
    # the start-up line names the setting; decode ran in graphs but for two steps
    lines = [
        "[2026-03-02 09:59:00 TP0] server_args=ServerArgs(model_path='m', tp_size=1, "
        "mem_fraction_static=0.88, disable_cuda_graph=False)",
        *(_decode(s, 24, s not in (8, 20), 2400.0) for s in range(0, 40, 4)),
    ]
    triage = _triage(tmp_path, lines)
    assert triage.timeline.graph_use is not None
    assert triage.timeline.graph_use.eager_share == pytest.approx(0.2)
    assert _kernel(triage) == {}
    assert triage.diagnosis.primary is None


def test_prefill_lines_saying_cuda_graph_false_are_not_eager_decode(tmp_path: Path) -> None:
    # newer SGLang prefill lines end with "cuda graph: False": a prefill is never a decode
    prefill = (
        "[2026-03-02 10:00:{:02d}] Prefill batch, #new-seq: 2, #new-token: 578, #cached-token: "
        "0, token usage: 0.00, #running-req: 1, #queue-req: 0, input throughput (token/s): "
        "9610.84, cuda graph: False"
    )
    triage = _triage(tmp_path, [prefill.format(s) for s in (1, 2, 3)])
    assert triage.timeline.graph_use is None
    assert _kernel(triage) == {}


def test_eager_steps_above_the_captured_batch_with_long_steps_are_a_warning(
    tmp_path: Path,
) -> None:
    # 400 requests at 5,000 tokens/s: a token every 80 ms per request, the launches amortised
    lines = [_decode(s, 400, False, 5000.0) for s in range(0, 40, 4)]
    triage = _triage(tmp_path, lines)
    assert _kernel(triage) == {"kernel.eager_decode": Status.WARNING}
    assert triage.diagnosis.primary is None


def test_graphs_off_at_start_up_with_a_healthy_log_is_only_a_warning(tmp_path: Path) -> None:
    """vLLM run with --enforce-eager, nothing queued, nothing stalled: no primary."""
    stats = (
        "INFO 03-02 10:00:{:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 310.0 "
        "tokens/s, Avg generation throughput: 420.0 tokens/s, Running: 6 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 8.1%, Prefix cache hit rate: 40.0%"
    )
    lines = [
        "INFO 03-02 09:59:40 [core.py:61] Initializing a V1 LLM engine (v0.9.1) with config: "
        "model='m', max_seq_len=8192, tensor_parallel_size=1, pipeline_parallel_size=1, "
        "enforce_eager=True, kv_cache_dtype=auto",
        *(stats.format(s) for s in range(0, 60, 10)),
    ]
    triage = _triage(tmp_path, lines)
    assert _kernel(triage) == {"kernel.graphs_off": Status.WARNING}
    assert triage.diagnosis.primary is None


VOLTA = (
    "INFO 03-02 09:59:41 [selector.py:217] Cannot use FlashAttention-2 backend for Volta and "
    "Turing GPUs."
)
XFORMERS = "INFO 03-02 09:59:41 [selector.py:129] Using XFormers backend."


def test_vllm_selector_lines_are_attention_fallbacks_with_their_reason() -> None:
    assert VLLM.log is not None and VLLM.log.read_events is not None
    (event,) = VLLM.log.read_events(VOLTA)
    assert event.kind is EventKind.ATTENTION_FALLBACK
    assert event.values == {"reason": float(AttentionFallback.GPU), "kept_fused": 1.0}
    head = (
        "INFO 03-02 09:59:41 selector.py:150] Cannot use FlashAttention-2 backend for head size 72."
    )
    assert VLLM.log.read_events(head)[0].values["reason"] == AttentionFallback.HEAD_SIZE
    fp8 = (
        "INFO 03-02 09:59:41 selector.py:150] Cannot use FlashAttention-2 backend for FP8 KV cache."
    )
    assert VLLM.log.read_events(fp8)[0].values["reason"] == AttentionFallback.KV_CACHE_DTYPE
    # the backend chosen is no fallback by itself (VLLM_ATTENTION_BACKEND=XFORMERS says it too)
    assert VLLM.log.read_events(XFORMERS) == ()


def test_a_vllm_log_on_a_turing_gpu_names_it_in_a_warning(tmp_path: Path) -> None:
    stats = (
        "INFO 03-02 10:00:{:02d} metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg "
        "generation throughput: 61.0 tokens/s, Running: 4 reqs, Swapped: 0 reqs, Pending: 0 "
        "reqs, GPU KV cache usage: 3.0%, CPU KV cache usage: 0.0%."
    )
    triage = _triage(tmp_path, [VOLTA, XFORMERS, *(stats.format(s) for s in (0, 10, 20))])
    assert _kernel(triage) == {"kernel.attention_fallback": Status.WARNING}
    (finding,) = triage.diagnosis.layer(Layer.KERNEL).findings
    assert "to another fused kernel" in finding.title
    assert "Volta or Turing GPU (compute capability below 8.0)" in finding.title
    assert triage.diagnosis.primary is None


TGI_NO_FLASH = (
    "2026-03-02T10:00:03.448329Z  WARN shard-manager: text_generation_launcher: Could not "
    "import Flash Attention enabled models: GPU with CUDA capability 7 0 is not supported"
)


def test_tgi_on_a_volta_gpu_is_read_not_refused(tmp_path: Path) -> None:
    assert TGI.log is not None and TGI.log.read_events is not None
    (event,) = TGI.log.read_events(TGI_NO_FLASH)
    assert event.values == {
        "reason": float(AttentionFallback.GPU),
        "capability": 7.0,
        "kept_fused": 0.0,
    }
    triage = _triage(tmp_path, [TGI_NO_FLASH])
    assert triage.engine == "tgi"
    (finding,) = triage.diagnosis.layer(Layer.KERNEL).findings
    assert finding.id == "kernel.attention_fallback" and finding.status is Status.WARNING
    assert "non-flash attention" in finding.title and "capability 7.0" in finding.title


def test_tgi_v2_refused_with_v1_kept_and_a_traceback_say_the_most_specific() -> None:
    # a T4 (7.5): V2 refused, V1 serves; then an import that failed without a capability
    lines = [
        "2026-03-02T10:00:03.1Z  WARN text_generation_launcher: Unable to use Flash Attention "
        "V2: GPU with CUDA capability 7 5 is not supported for Flash Attention V2",
        "2026-03-02T10:00:04.1Z  WARN text_generation_launcher: Could not import Flash "
        "Attention enabled models",
    ]
    summary = summarise_events(read_records("\n".join(lines), 0.0))
    assert summary.attention_fallbacks == 2
    assert summary.attention_fallback == {
        "reason": float(AttentionFallback.GPU),
        "capability": 7.5,
        "kept_fused": 0.0,  # the flash models were not imported at all
    }


TGI_ARGS = (
    '2026-03-01T10:00:01.100000Z  INFO text_generation_launcher: Args { model_id: "m", '
    "revision: None, validation_workers: 2, sharded: None, num_shard: None }"
)


def test_diagnose_log_reads_the_same_kernel_signals_start_up_before_the_window() -> None:
    """`diagnose --log`: the decode lines within the run's window, the fallback its last
    start said before it (the server started before the run)."""
    # the reader's test, engines mixed: TGI's start (its Args line) and fallback a day before
    start_up = TGI_NO_FLASH.replace("2026-03-02T10:00:03", "2026-03-01T10:00:03")
    lines = [TGI_ARGS, start_up, *(_decode(s, 32, False, 2900.0) for s in range(0, 40, 4))]
    window = (_unix("2026-03-02 10:00:00"), _unix("2026-03-02 10:00:40"))
    log = parse_server_log("\n".join(lines), window)
    assert log.graph_use is not None and log.graph_use.eager_share == 1.0
    said = {s.name: s.value for s in log_signals(log, (0.0, 40.0))}
    assert said["log.eager_decode_share"] == 1.0 and said["log.eager_decode_batch"] == 32.0
    assert said["log.attention_fallbacks"] == 1 and said["log.gpu_capability"] == 7.0


# the reviewer's restart.log (/tmp/review_kernel, written by hand in vLLM V0's words), cut to
# the lines that matter: a start at 08:00 with an FP8 KV cache (flash refused), a restart at
# 09:59 with flash; the run's window is 10:00–10:01
_V0_STATS = (
    "INFO 03-02 {at} metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg generation "
    "throughput: 610.0 tokens/s, Running: 8 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV "
    "cache usage: 3.0%, CPU KV cache usage: 0.0%."
)
RESTARTED = [
    "INFO 03-02 08:00:02 llm_engine.py:174] Initializing an LLM engine (v0.5.4) with config: "
    "model='m', kv_cache_dtype=fp8, enforce_eager=False, tensor_parallel_size=1",
    "INFO 03-02 08:00:05 selector.py:150] Cannot use FlashAttention-2 backend for FP8 KV cache.",
    "INFO 03-02 08:00:05 selector.py:54] Using XFormers backend.",
    _V0_STATS.format(at="08:01:00"),
    "INFO 03-02 09:59:02 llm_engine.py:174] Initializing an LLM engine (v0.5.4) with config: "
    "model='m', kv_cache_dtype=auto, enforce_eager=False, tensor_parallel_size=1",
    "INFO 03-02 09:59:05 selector.py:54] Using Flash Attention backend.",
    *(_V0_STATS.format(at=f"10:00:{s:02d}") for s in range(0, 60, 10)),
]


def test_a_restart_leaves_what_the_earlier_start_said(tmp_path: Path) -> None:
    # vLLM's stamps carry no year: the one nearest the window's
    window = (_unix("2026-03-02 10:00:00"), _unix("2026-03-02 10:01:00"))
    log = parse_server_log("\n".join(RESTARTED), window)
    assert log.attention_fallbacks == ()
    said = {s.name for s in log_signals(log, (0.0, 60.0))}
    assert "log.attention_fallbacks" not in said
    # a window within the first start keeps its fallback
    first = (_unix("2026-03-02 08:01:00"), _unix("2026-03-02 08:01:10"))
    assert len(parse_server_log("\n".join(RESTARTED), first).attention_fallbacks) == 1
    # `logs`: the lines since the last start
    assert _kernel(_triage(tmp_path, RESTARTED)) == {}
    assert _kernel(_triage(tmp_path, RESTARTED[:4], "first.log")) == {
        "kernel.attention_fallback": Status.WARNING
    }


@pytest.mark.parametrize(
    "reason",
    [
        "`USE_FLASH_ATTENTION` is false.",  # the user's own setting
        "CUDA is not available",  # no GPU seen
        "System cpu doesn't support flash/paged attention",  # a CPU build
    ],
)
def test_tgi_flash_import_reasons_that_are_no_fallback(reason: str) -> None:
    """TGI's words: utils/flash_attn.py (commit 00e0d2d7) and layers/attention/__init__.py
    (commit 07128cc1) raise these; models/__init__.py logs them after its own words."""
    assert TGI.log is not None and TGI.log.read_events is not None
    line = (
        "2026-03-02T10:00:03.448329Z  WARN text_generation_launcher: Could not import Flash "
        f"Attention enabled models: {reason}"
    )
    assert TGI.log.read_events(line) == ()
    missing = line.replace(reason, "Flash Attention V2 is not installed.")
    (event,) = TGI.log.read_events(missing)
    assert event.values["reason"] == AttentionFallback.NOT_AVAILABLE


def test_speculative_steps_are_a_token_time_times_the_accept_len(tmp_path: Path) -> None:
    # 8 requests at 800 tokens/s, 3 tokens accepted a step (the reviewer's spec.log's line):
    # a token every 10 ms, a step every 30 ms
    line = (
        "[2026-03-02 10:00:{:02d} TP0] Decode batch. #running-req: 8, #token: 4000, token "
        "usage: 0.10, accept len: 3.00, accept rate: 0.50, cuda graph: False, gen throughput "
        "(token/s): 800.00, #queue-req: 0"
    )
    lines = [line.format(s) for s in range(0, 40, 4)]
    graphs = _triage(tmp_path, lines).timeline.graph_use
    assert graphs is not None and graphs.eager_token_s == pytest.approx(0.01)
    assert graphs.eager_step_s == pytest.approx(0.03)
    window = (_unix("2026-03-02 10:00:00"), _unix("2026-03-02 10:00:40"))
    log = parse_server_log("\n".join(lines), window)
    assert log.graph_use is not None and log.graph_use.eager_step_s == pytest.approx(0.03)


def test_dp_attention_lines_and_the_captured_batch_are_read(tmp_path: Path) -> None:
    # SGLang with DP attention: each rank logs its own decode line, "DP0 TP0"
    start = (
        "[2026-03-02 09:59:00] server_args=ServerArgs(model_path='m', tp_size=2, dp_size=2, "
        "enable_dp_attention=True, disable_cuda_graph=False, cuda_graph_max_bs=160)"
    )
    ranked = [
        _decode(s, 24, s % 8 == 0, 1500.0).replace(" TP0]", f" DP{s % 2} TP{s % 2}]")
        for s in range(0, 40, 2)
    ]
    triage = _triage(tmp_path, [start, *ranked])
    graphs = triage.timeline.graph_use
    assert graphs is not None and graphs.ranked
    assert triage.timeline.events.config["cuda_graph_max_batch"] == 160.0
    (finding,) = triage.diagnosis.layer(Layer.KERNEL).findings
    assert finding.status is Status.WARNING and "data-parallel attention" in finding.title


def test_diagnose_log_reads_the_captured_batch_its_start_said() -> None:
    """`diagnose --log` reads SGLang's `cuda_graph_max_bs` from the start-up before the run's
    window, as `logs` does: eager decode above it is by design (the rule's words and its
    status rest on it; the review's case: max 8, eager at 24, the ITL missed)."""
    start = (
        "[2026-03-02 09:59:00] server_args=ServerArgs(model_path='m', tp_size=1, "
        "disable_cuda_graph=False, cuda_graph_max_bs=8)"
    )
    lines = [start, *(_decode(s, 24, False, 1500.0) for s in range(0, 60, 4))]
    window = (_unix("2026-03-02 10:00:00"), _unix("2026-03-02 10:01:00"))
    said = {s.name: s.value for s in log_signals(parse_server_log("\n".join(lines), window))}
    assert said["config.cuda_graph_max_batch"] == 8.0


def test_vllm_v0_engines_of_0_7_to_0_9_mark_a_restart() -> None:
    """vLLM 0.7–0.9 on its V0 engine says "Initializing a V0 LLM engine": a restart there
    leaves the earlier start's fallback behind too."""
    lines = [
        line.replace("Initializing an LLM engine (v0.5.4)", "Initializing a V0 LLM engine (v0.8.5)")
        for line in RESTARTED
    ]
    window = (_unix("2026-03-02 10:00:00"), _unix("2026-03-02 10:01:00"))
    assert parse_server_log("\n".join(lines), window).attention_fallbacks == ()
