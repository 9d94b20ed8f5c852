"""Host time attributed to the process that spends it (issue 32): the API server's per-token
work is the application layer's finding, and the host waits in kernel and scheduling defer
to it only when the engine core is not the one spending the host's time."""

from __future__ import annotations

import pytest

from infertriage.diagnose import RULES, Evidence, diagnose_evidence
from infertriage.report.diagnosis import evidence_value
from infertriage.schemas import Finding, Layer, Status, Thresholds

from .evidence_helpers import make_evidence

# the API server at 400 µs of CPU a streamed token, 3,000 tokens/s: its work fills every
# inter-token interval; the GPU waits on the host and ITL misses its SLO
FRONT_BOUND = {
    "proc__frontend_cpu_per_token_s": 400e-6,
    "proc__frontend_cpu": 0.95,
    "trace__host_wait_fraction": 0.45,
    "trace__step_cpu_gap_fraction": 0.45,
    "client__itl_p95_s": 0.09,
}
CONTENDED = {  # the load client and the server on one saturated host
    "host__server_local": 1,
    "host__cpu_mean": 0.97,
    "host__cores": 2,
    "host__run_queue_per_core": 2.0,
    "proc__cpu_wait_share": 0.4,
    "host__other_cpu_share": 0.5,
    "host__client_cpu_cores": 0.9,
}


def _findings(**overrides: float | None) -> dict[str, Finding]:
    d = diagnose_evidence(make_evidence(**overrides), Thresholds())
    return {f.id: f for layer in d.layers for f in layer.findings}


def test_the_finding_states_its_cost_share_and_the_engines_flags() -> None:
    ev = make_evidence(**FRONT_BOUND)
    finding = RULES["application.frontend_per_token"].fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK
    assert finding.title.startswith("the API server spends 400 µs of CPU per streamed token")
    assert "100% of every inter-token interval" in finding.title
    steps = " ".join(finding.next_steps)
    assert "--api-server-count N" in steps and "--stream-interval N" in steps
    sglang = RULES["application.frontend_per_token"].fn(
        Evidence(ev.signals, "sglang"), Thresholds()
    )
    assert sglang is not None and "--tokenizer-worker-num N" in " ".join(sglang.next_steps)


def test_a_ttft_miss_in_front_of_the_engine_is_its_share() -> None:
    # the engine's first token at 40 ms, the client's at 500 ms: prompts wait to be tokenised
    ev = make_evidence(
        proc__frontend_cpu_per_token_s=400e-6,
        client__throughput_tok_s=800.0,
        client__ttft_p50_s=0.5,
        client__ttft_p95_s=0.9,
        server__ttft_p50_s=0.04,
    )
    finding = RULES["application.frontend_per_token"].fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.BOTTLENECK
    assert finding.explains == pytest.approx(0.92)
    assert "92% of TTFT p50 is spent in front of the engine" in finding.title


def test_a_warning_while_the_slos_hold() -> None:
    ev = make_evidence(proc__frontend_cpu_per_token_s=400e-6)
    finding = RULES["application.frontend_per_token"].fn(ev, Thresholds())
    assert finding is not None and finding.status is Status.WARNING


def test_a_small_share_of_the_interval_is_no_finding() -> None:
    # a heavy cost per token at 300 tokens/s (a 70B model's few streams): 12 % of each interval
    ev = make_evidence(proc__frontend_cpu_per_token_s=400e-6, client__throughput_tok_s=300.0)
    assert RULES["application.frontend_per_token"].fn(ev, Thresholds()) is None


def test_host_waits_defer_to_the_api_servers_per_token_work() -> None:
    d = diagnose_evidence(make_evidence(**FRONT_BOUND), Thresholds())
    assert d.primary is not None and d.primary.finding == "application.frontend_per_token"
    assert d.primary.layer is Layer.APPLICATION
    chained = [link.finding for link in d.chain]
    assert "kernel.host_wait" in chained and "scheduling.step_cpu_gap" in chained


def test_an_engine_core_bound_host_is_still_the_engine_cores() -> None:
    # the engine core's thread saturated: the host time between steps is its, even with a
    # heavy API server beside it (a warning there)
    d = diagnose_evidence(make_evidence(**FRONT_BOUND, proc__engine_thread_cpu=0.99), Thresholds())
    assert d.primary is not None and d.primary.finding == "scheduling.engine_loop_cpu"
    both = _findings(**FRONT_BOUND, proc__engine_thread_cpu=0.99)
    assert both["application.frontend_per_token"].status is Status.WARNING
    # and with a lean API server the application layer holds no per-token finding at all
    lean = _findings(**{**FRONT_BOUND, "proc__frontend_cpu_per_token_s": 60e-6})
    assert "application.frontend_per_token" not in lean


def test_cpu_per_token_is_not_held_back_by_a_contended_host() -> None:
    # CPU seconds per token count the API server's work; a co-runner adds waits, not work
    d = diagnose_evidence(make_evidence(**FRONT_BOUND, **CONTENDED), Thresholds())
    assert d.primary is not None and d.primary.finding == "application.frontend_per_token"


def test_cost_per_token_reads_in_microseconds_on_screen() -> None:
    finding = RULES["application.frontend_per_token"].fn(make_evidence(**FRONT_BOUND), Thresholds())
    assert finding is not None
    shown = {item.signal: evidence_value(item) for item in finding.evidence}
    assert shown["proc.frontend_cpu_per_token_s"] == "400 µs/token"
    assert shown["proc.frontend_cpu"] == "0.95 cores"


def test_apart_from_the_engine_core_it_waits_until_the_api_server_nears_a_core() -> None:
    """vLLM V1: the engine core steps on in its own process; the API server's per-token work
    delays the streams only when its busiest thread is near a core."""
    idle = _findings(**FRONT_BOUND, proc__engine_apart=1, proc__frontend_thread_cpu=0.4)
    assert "application.frontend_per_token" not in idle
    busy = _findings(**FRONT_BOUND, proc__engine_apart=1, proc__frontend_thread_cpu=0.9)
    assert "application.frontend_per_token" in busy
    shared = _findings(**FRONT_BOUND, proc__engine_apart=0, proc__frontend_thread_cpu=0.4)
    assert "application.frontend_per_token" in shared
