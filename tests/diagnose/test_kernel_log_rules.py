"""The kernel rules over a log's word: when they are a warning and when a bottleneck.

A start-up line alone (graphs off, an attention fallback) is a warning; per-step lines make a
bottleneck only when the ITL SLO is missed, the eager steps are short and enough, with no
data-parallel attention and no trace to judge; a measured cause beside them ranks first."""

from __future__ import annotations

import pytest

from infertriage.diagnose import RULES, Evidence, diagnose_evidence
from infertriage.engines import AttentionFallback
from infertriage.schemas import Layer, Status, Thresholds, stored_thresholds

from .evidence_helpers import make_evidence

SLOW_ITL = {"client__itl_p95_s": 0.12}


def _run(rule_id: str, ev: Evidence) -> Status | None:
    finding = RULES[rule_id].fn(ev, Thresholds())
    return None if finding is None else finding.status


# every decode line eager, ten of them, steps of 10 ms, no trace to judge them
EAGER = {
    "log__eager_decode_share": 1.0,
    "log__eager_decode_lines": 10,
    "log__eager_decode_step_s": 0.01,
    "log__eager_decode_token_s": 0.01,
    "trace__cuda_graph_fraction": None,
}


def test_eager_decode_is_a_bottleneck_only_with_a_missed_itl_and_short_steps() -> None:
    # short eager steps with every SLO met: a healthy run (big batches step in 15–25 ms)
    assert _run("kernel.eager_decode", make_evidence(**EAGER)) is Status.WARNING
    assert _run("kernel.eager_decode", make_evidence(**EAGER, **SLOW_ITL)) is Status.BOTTLENECK
    long = {**EAGER, "log__eager_decode_step_s": 0.08}
    assert _run("kernel.eager_decode", make_evidence(**long, **SLOW_ITL)) is Status.WARNING
    unknown = {**EAGER, "log__eager_decode_step_s": None}  # no throughput said: no step time
    assert _run("kernel.eager_decode", make_evidence(**unknown, **SLOW_ITL)) is Status.WARNING


def test_eager_decode_is_no_bottleneck_for_one_line_dp_attention_or_a_trace() -> None:
    one_line = {**EAGER, "log__eager_decode_lines": 1}
    assert _run("kernel.eager_decode", make_evidence(**one_line, **SLOW_ITL)) is Status.WARNING
    # DP attention: a rank's decode runs eagerly whenever another rank prefills
    ranked = make_evidence(**{**EAGER, "log__eager_decode_ranked": 1}, **SLOW_ITL)
    found = RULES["kernel.eager_decode"].fn(ranked, Thresholds())
    assert found is not None and found.status is Status.WARNING
    assert "data-parallel attention" in found.title
    assert not any("cuda-graph" in step for step in found.next_steps)
    # a trace measures graph use: kernel.launch_bound decides
    traced = {**EAGER, "trace__cuda_graph_fraction": 0.0}
    assert _run("kernel.eager_decode", make_evidence(**traced, **SLOW_ITL)) is Status.WARNING


def test_eager_above_the_captured_batch_is_by_design() -> None:
    """SGLang's start-up says cuda_graph_max_bs=160; the eager steps ran 200 requests."""
    above = {**EAGER, "log__eager_decode_batch": 200, "config__cuda_graph_max_batch": 160}
    t = Thresholds()
    met = RULES["kernel.eager_decode"].fn(Evidence(make_evidence(**above).signals, "sglang"), t)
    assert met is not None and met.status is Status.WARNING
    assert "above the largest batch captured in a graph (160), eager by design" in met.title
    assert not any("--cuda-graph-max-bs" in step for step in met.next_steps)
    missed = Evidence(make_evidence(**above, **SLOW_ITL).signals, "sglang")
    found = RULES["kernel.eager_decode"].fn(missed, t)
    assert found is not None and found.status is Status.WARNING
    assert "raise `--cuda-graph-max-bs` (eager at 200 requests)" in found.next_steps[0]


def test_eager_decode_says_drop_the_flag_only_when_graphs_may_be_off() -> None:
    t = Thresholds()
    for graphs, said in ((1.0, False), (0.0, True), (None, True)):
        ev = Evidence(make_evidence(**EAGER, config__cuda_graphs=graphs).signals, "sglang")
        found = RULES["kernel.eager_decode"].fn(ev, t)
        assert found is not None
        assert any("drop `--disable-cuda-graph`" in s for s in found.next_steps) is said


def test_graphs_off_at_start_up_is_never_a_bottleneck() -> None:
    alone = {"config__cuda_graphs": 0, "log__eager_decode_share": None}
    no_trace = {**alone, "trace__cuda_graph_fraction": None}
    assert _run("kernel.graphs_off", make_evidence(**no_trace)) is Status.WARNING
    assert _run("kernel.graphs_off", make_evidence(**no_trace, **SLOW_ITL)) is Status.WARNING
    # per-step lines or a trace judge it instead
    judged = make_evidence(config__cuda_graphs=0, trace__cuda_graph_fraction=None)
    assert _run("kernel.graphs_off", judged) is None
    assert _run("kernel.graphs_off", make_evidence(**alone)) is None  # the trace's


def _fallback(reason: AttentionFallback, **more: float | None) -> Evidence:
    return make_evidence(
        log__attention_fallbacks=1, log__attention_fallback_reason=float(reason), **more
    )


def test_an_attention_fallback_is_a_bottleneck_only_missing_the_itl_with_no_fused_kernel() -> None:
    gpu = AttentionFallback.GPU
    assert _run("kernel.attention_fallback", _fallback(gpu)) is Status.WARNING
    none_kept = _fallback(gpu, log__attention_kept_fused=0, **SLOW_ITL)
    assert _run("kernel.attention_fallback", none_kept) is Status.BOTTLENECK
    # another fused kernel serves (vLLM's XFormers, TGI's Flash Attention V1), or unsaid
    kept = _fallback(gpu, log__attention_kept_fused=1, **SLOW_ITL)
    assert _run("kernel.attention_fallback", kept) is Status.WARNING
    assert _run("kernel.attention_fallback", _fallback(gpu, **SLOW_ITL)) is Status.WARNING


def test_the_fallback_names_the_capability_and_a_real_next_step() -> None:
    t = Thresholds()
    gpu = RULES["kernel.attention_fallback"].fn(
        _fallback(AttentionFallback.GPU, log__gpu_capability=7.0, log__attention_kept_fused=0),
        t,
    )
    assert gpu is not None
    assert "compute capability 7.0" in gpu.title and "non-flash attention" in gpu.title
    assert "8.0 or newer" in gpu.next_steps[0]
    fp8 = Evidence(
        _fallback(AttentionFallback.KV_CACHE_DTYPE, log__attention_kept_fused=1).signals, "vllm"
    )
    found = RULES["kernel.attention_fallback"].fn(fp8, t)
    assert found is not None and "the KV cache is FP8" in found.title
    assert "VLLM_ATTENTION_BACKEND" in found.next_steps[0]
    sglang = Evidence(fp8.signals, "sglang")
    found = RULES["kernel.attention_fallback"].fn(sglang, t)
    assert found is not None and "--attention-backend" in found.next_steps[0]


def test_eager_decode_lines_are_the_root_of_a_gpu_busy_not_computing() -> None:
    # GPU util 97 %, SM active 60 %, SLOs missed (the seeds' case study, without its trace);
    # the log says every decode step ran eagerly
    busy = {
        "gpu__util_mean": 0.97,
        "gpu__sm_active_mean": 0.6,
        "trace__cuda_graph_fraction": None,
        "client__ttft_p95_s": 0.9,
        **SLOW_ITL,
    }
    ev = make_evidence(**{**busy, **EAGER})
    diagnosis = diagnose_evidence(ev, Thresholds())
    assert diagnosis.primary is not None and diagnosis.primary.finding == "kernel.eager_decode"
    chain = [link.finding for link in diagnosis.chain]
    assert chain[:2] == ["kernel.eager_decode", "hardware.busy_not_computing"]
    # the start-up's word alone is never the root: the miss stays unexplained, graphs off a
    # candidate among the warnings
    off = make_evidence(**busy, config__cuda_graphs=0, log__eager_decode_share=None)
    diagnosis = diagnose_evidence(off, Thresholds())
    assert diagnosis.primary is None and diagnosis.unexplained is not None
    assert diagnosis.layer(Layer.KERNEL).status is Status.WARNING


# /tmp/review_kernel/rank_probe.py's live runs (the reviewer's): a measured cause with the ITL
# missed (80 ms), a log beside it that says eager decode or an attention fallback
_MEASURED = {
    "hardware.hbm_bandwidth_bound": {
        "gpu__dram_active_mean": 0.9,
        "client__itl_p95_s": 0.08,
        "queue__running_max": 200.0,
    },
    "scheduling.engine_loop_cpu": {"proc__engine_thread_cpu": 0.99, "client__itl_p95_s": 0.08},
    # its communication share beside the evidence's HBM-bound decode: that ranks first
    "parallelism.communication_share": {
        "trace__nccl_fraction": 0.4,
        "client__itl_p95_s": 0.08,
        "config__tensor_parallel": 4.0,
    },
}
_LOG_SAYS = {
    "kernel.eager_decode": EAGER,  # no trace: the log's word alone
    "kernel.attention_fallback": {
        "log__attention_fallbacks": 1,
        "log__attention_fallback_reason": float(AttentionFallback.GPU),
        "log__attention_kept_fused": 0,
    },
}


@pytest.mark.parametrize("measured", sorted(_MEASURED))
@pytest.mark.parametrize("said", sorted(_LOG_SAYS))
def test_a_measured_cause_outranks_what_a_log_says(measured: str, said: str) -> None:
    base = {"trace__cuda_graph_fraction": None, **_MEASURED[measured]}
    alone = diagnose_evidence(make_evidence(**base), Thresholds()).primary
    assert alone is not None
    ev = make_evidence(**{**base, **_LOG_SAYS[said]})
    diagnosis = diagnose_evidence(ev, Thresholds())
    found = {f.id: f for layer in diagnosis.layers for f in layer.findings}
    assert found[said].status is Status.BOTTLENECK  # it still names the log's finding
    assert diagnosis.primary is not None and diagnosis.primary.finding == alone.finding
    assert not diagnosis.primary.finding.startswith("kernel.")


def test_a_run_that_stored_the_per_token_threshold_reads_it_as_the_step_time() -> None:
    # the rules' first version named it `eager_decode_token_s` (a step with no speculation)
    assert stored_thresholds({"eager_decode_token_s": 0.02}) == {"eager_decode_step_s": 0.02}
