"""The kernel rules over a log's word: when they are a warning and when a bottleneck.

A start-up line alone (graphs off, an attention fallback) is a warning; per-step lines of
short eager decode steps, or a missed ITL SLO, make a bottleneck."""

from __future__ import annotations

from infertriage.diagnose import RULES, Evidence, diagnose_evidence
from infertriage.engines import AttentionFallback
from infertriage.schemas import Layer, Status, Thresholds

from .evidence_helpers import make_evidence

SLOW_ITL = {"client__itl_p95_s": 0.12}


def _run(rule_id: str, ev: Evidence) -> Status | None:
    finding = RULES[rule_id].fn(ev, Thresholds())
    return None if finding is None else finding.status


def test_eager_decode_is_a_bottleneck_for_short_steps_or_a_missed_itl() -> None:
    short = make_evidence(log__eager_decode_share=1.0, log__eager_decode_token_s=0.01)
    long = make_evidence(log__eager_decode_share=1.0, log__eager_decode_token_s=0.08)
    unknown = make_evidence(log__eager_decode_share=1.0)  # no throughput said: no step time
    assert _run("kernel.eager_decode", short) is Status.BOTTLENECK
    assert _run("kernel.eager_decode", long) is Status.WARNING
    assert _run("kernel.eager_decode", unknown) is Status.WARNING
    slow = make_evidence(log__eager_decode_share=1.0, log__eager_decode_token_s=0.08, **SLOW_ITL)
    assert _run("kernel.eager_decode", slow) is Status.BOTTLENECK


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


def test_an_attention_fallback_is_a_warning_unless_the_itl_is_missed() -> None:
    assert _run("kernel.attention_fallback", _fallback(AttentionFallback.GPU)) is Status.WARNING
    slow = _fallback(AttentionFallback.GPU, **SLOW_ITL)
    assert _run("kernel.attention_fallback", slow) is Status.BOTTLENECK


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
    ev = make_evidence(**busy, log__eager_decode_share=1.0, log__eager_decode_token_s=0.08)
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
