"""diagnose, level 3: hardware-layer rules — SM, tensor and HBM activity, PCIe, copies, errors."""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above, severity_below
from infertriage.diagnose.rules.parallelism import engine_running
from infertriage.diagnose.symptom import flag, itl_missed, itl_near, slo_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.HARDWARE


@rule("hardware.busy_not_computing", _L, ("gpu.util_mean", "gpu.sm_active_mean"))
def busy_not_computing(ev: Evidence, t: Thresholds) -> Finding | None:
    util, sm = ev.get("gpu.util_mean") or 0.0, ev.get("gpu.sm_active_mean") or 0.0
    if util < t.sm_active or sm >= t.sm_active or util - sm < 0.3:
        return None
    return make_finding(
        "hardware.busy_not_computing",
        _L,
        bottleneck=False,
        severity=severity_below(sm / util, 0.8, 0.2),
        explains=(util - sm) / util,
        title=f"GPU 'utilisation' {util:.0%} but SMs active only {sm:.0%}",
        evidence=ev,
        used=(("gpu.util_mean", t.sm_active), ("gpu.sm_active_mean", t.sm_active)),
        explanation=(
            "DCGM_FI_DEV_GPU_UTIL counts time in which any kernel runs, not how much of the GPU "
            "it uses; SM activity this low means tiny kernels and gaps between them."
        ),
        next_steps=(
            "capture a trace (`--profile 5`) and look at kernels per step and launch gaps",
            f"make sure CUDA graphs are on (no `{flag(ev, Knob.EAGER)}`)",
        ),
    )


@rule(
    "hardware.hbm_bandwidth_bound",
    _L,
    ("gpu.dram_active_mean", "client.itl_p95_s", "queue.running_max"),
)
def hbm_bandwidth_bound(ev: Evidence, t: Thresholds) -> Finding | None:
    """Decode at the HBM roofline: a bottleneck when ITL misses its SLO, else a warning (the
    bandwidth is the ceiling more load will meet)."""
    dram, batch = ev.get("gpu.dram_active_mean") or 0.0, engine_running(ev)  # one engine's
    util = ev.get("gpu.util_mean")
    if util:  # HBM activity while kernels run: idle time between requests is not headroom
        dram = min(1.0, dram / util)
    itl, missed = ev.get("client.itl_p95_s") or 0.0, itl_missed(ev, t)
    if dram < t.dram_active_decode or batch < t.hbm_min_decode_batch:
        return None
    if not (missed or itl_near(ev, t)):
        return None
    return make_finding(
        "hardware.hbm_bandwidth_bound",
        _L,
        bottleneck=missed,
        severity=severity_above(itl, t.itl_p95_s, 3 * t.itl_p95_s) if missed else 0.3,
        explains=min(1.0, dram / t.dram_active_decode),
        title=f"decode at the HBM roofline ({dram:.0%} DRAM active while busy), "
        + ("ITL misses its SLO" if missed else "ITL within its SLO: no headroom for more load"),
        evidence=ev,
        used=(
            ("gpu.dram_active_mean", t.dram_active_decode),
            ("client.itl_p95_s", t.itl_p95_s if missed else t.slo_headroom * t.itl_p95_s),
        ),
        explanation=(
            "Each decode step reads the weights and every sequence's KV cache; at this batch the "
            "GPU's memory bandwidth is the ceiling, not a defect of the server."
        ),
        next_steps=(
            "quantise weights or the KV cache (`--kv-cache-dtype fp8`) to move fewer bytes",
            "add replicas or a GPU with more HBM bandwidth",
            f"cap the batch (`{flag(ev, Knob.MAX_SEATS)}`) if ITL matters more than throughput",
        ),
    )


@rule(
    "hardware.below_roofline",
    _L,
    ("client.throughput_tok_s", "plan.throughput_roofline_tok_s"),
)
def below_roofline(ev: Evidence, t: Thresholds) -> Finding | None:
    measured = ev.get("client.throughput_tok_s") or 0.0
    ceiling = ev.get("plan.throughput_roofline_tok_s") or 0.0
    if ceiling <= 0 or measured >= t.roofline_efficiency * ceiling:
        return None
    efficiency = measured / ceiling
    return make_finding(
        "hardware.below_roofline",
        _L,
        bottleneck=False,
        severity=severity_below(efficiency, t.roofline_efficiency, 0.1),
        explains=1 - efficiency,
        title=f"throughput {efficiency:.0%} of the roofline for this batch",
        evidence=ev,
        used=(("client.throughput_tok_s", t.roofline_efficiency * ceiling),),
        explanation="The GPU could serve this batch much faster; the time goes somewhere else.",
        next_steps=("see the kernel, scheduling and application layers for where the time goes",),
    )


@rule("hardware.pcie_saturated", _L, ("gpu.pcie_utilization",))
def pcie_saturated(ev: Evidence, t: Thresholds) -> Finding | None:
    share = ev.get("gpu.pcie_utilization") or 0.0
    if share < t.pcie_saturated:
        return None
    return make_finding(
        "hardware.pcie_saturated",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity_above(share, t.pcie_saturated, 1.0),
        explains=share,
        title=f"PCIe {share:.0%} busy",
        evidence=ev,
        used=(("gpu.pcie_utilization", t.pcie_saturated),),
        explanation="Host-device or GPU-GPU traffic fills the PCIe link.",
        next_steps=("keep tensor parallelism on NVLink; avoid CPU offload and pageable copies",),
    )


@rule("hardware.pageable_memcpy", _L, ("trace.memcpy_fraction",))
def pageable_memcpy(ev: Evidence, t: Thresholds) -> Finding | None:
    # a trace with no host copies has no pageable share: none to judge, nothing missing
    pageable = ev.get("trace.memcpy.pageable_fraction") or 0.0
    copies = ev.get("trace.memcpy_fraction") or 0.0
    if pageable < t.pageable_fraction or copies < t.min_memcpy_fraction:
        return None
    return make_finding(
        "hardware.pageable_memcpy",
        _L,
        bottleneck=False,
        severity=severity_above(pageable, t.pageable_fraction, 1.0),
        explains=copies,
        title=f"{pageable:.0%} of host↔device bytes move through pageable memory",
        evidence=ev,
        used=(
            ("trace.memcpy.pageable_fraction", t.pageable_fraction),
            ("trace.memcpy_fraction", t.min_memcpy_fraction),
        ),
        explanation="Pageable copies are staged by the driver and cannot overlap kernels.",
        next_steps=("use pinned host memory (`tensor.pin_memory()`, `pin_memory=True`)",),
    )


@rule("hardware.xid_errors", _L, ("gpu.xid_errors",))
def xid_errors(ev: Evidence, t: Thresholds) -> Finding | None:
    xid = ev.get("gpu.xid_errors") or 0.0
    if xid <= 0:
        return None
    return make_finding(
        "hardware.xid_errors",
        _L,
        bottleneck=True,
        severity=1.0,
        explains=1.0,
        title=f"the GPU reported XID error {xid:.0f}",
        evidence=ev,
        used=(("gpu.xid_errors", 0.0),),
        explanation="XID errors are driver-reported GPU faults; results and latency are suspect.",
        next_steps=("check `dmesg` and `nvidia-smi -q`; drain the node if errors repeat",),
    )


@rule("hardware.profiling_counters_absent", _L, ("gpu.prof_fields_present",))
def profiling_counters_absent(ev: Evidence, t: Thresholds) -> Finding | None:
    if (ev.get("gpu.prof_fields_present") or 0.0) >= 1:
        return None
    return make_finding(
        "hardware.profiling_counters_absent",
        _L,
        bottleneck=False,
        severity=0.2,
        explains=0.1,
        title="DCGM profiling counters (SM, tensor, DRAM activity) are absent",
        evidence=ev,
        used=(("gpu.prof_fields_present", 1.0),),
        explanation="GPU_UTIL alone cannot tell a busy GPU from a GPU waiting on launches.",
        next_steps=(
            "uncomment DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE and "
            "DCGM_FI_PROF_DRAM_ACTIVE in dcgm-exporter's counters CSV "
            "(`-f dcp-metrics-included.csv`)",
        ),
    )
