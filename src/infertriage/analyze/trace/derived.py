"""analyze, level 1: the trace signals the diagnose rules read, derived from the measured ones.

Takes the `trace.*` signals of `make_signals`; gives the few that the rules
read under their own names: the host-wait share and syncs per step renamed,
the GPU's idle share waiting on launches outside CUDA graphs
(`trace.launch_gap_fraction`), the host's gap between graph-replayed steps
(`trace.step_cpu_gap_fraction`), copies' share of GPU time
(`trace.memcpy_fraction`) and whether attention ran the unfused math path
(`trace.attention_unfused`, 1 or 0). Both `trace` and `diagnose` read these,
so the two commands judge one trace by one set of signals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from infertriage.schemas.records import Signal

__all__ = ["derive_rule_signals"]

# the rules' name ← the trace analysis's name
_RENAMES = {
    "trace.host_wait_fraction": "trace.idle.host_wait_fraction",
    "trace.syncs_per_step": "trace.sync_calls_per_step",
}


def derive_rule_signals(signals: Sequence[Signal]) -> list[Signal]:
    """The derived signals only (the measured ones are not repeated)."""
    found = {s.name: s for s in signals}
    out = [_renamed(found[theirs], mine) for mine, theirs in _RENAMES.items() if theirs in found]
    out += _launch_gap(found)
    out += _copy_share(found)
    backends = [s for name, s in found.items() if name.startswith("trace.attention_backend.")]
    if backends:
        unfused = any(s.name.endswith(".math") for s in backends)
        out.append(_renamed(backends[0], "trace.attention_unfused", 1.0 if unfused else 0.0))
    return out


def _launch_gap(found: Mapping[str, Signal]) -> list[Signal]:
    """GPU idle waiting on launches: kernel-to-kernel gaps and host waits, outside CUDA graphs.

    With graphs the host's waits are scheduling between steps, not launches, so the
    share is scaled by the time not under graphs.
    """
    span = found.get("trace.gpu_span_s")
    if span is None or span.value <= 0:
        return []
    idle = sum(
        found[name].value
        for name in ("trace.idle.kernel_to_kernel_s", "trace.idle.host_wait_s")
        if name in found
    )
    graphs = found.get("trace.cuda_graph_fraction")
    eager = 1.0 - (graphs.value if graphs is not None else 0.0)
    share = idle / span.value * eager
    out = [Signal("trace.launch_gap_fraction", share, "fraction", span.source, span.window)]
    host = found.get("trace.idle.host_wait_s")
    if host is not None:
        # under CUDA graphs the GPU waits on the host only between steps: the scheduler's time
        gap = host.value / span.value * (1.0 - eager)
        out.append(Signal("trace.step_cpu_gap_fraction", gap, "fraction", span.source, span.window))
    return out


def _copy_share(found: Mapping[str, Signal]) -> list[Signal]:
    """Host↔device copies' share of the GPU span: how much pageable copies can cost."""
    span, copies = found.get("trace.gpu_span_s"), found.get("trace.memcpy_s")
    if span is None or copies is None or span.value <= 0:
        return []
    share = min(1.0, copies.value / span.value)
    return [Signal("trace.memcpy_fraction", share, "fraction", copies.source, copies.window)]


def _renamed(signal: Signal, name: str, value: float | None = None) -> Signal:
    """`signal` under the rules' name; a flag (`value` given) has unit "1"."""
    unit = "1" if value is not None else signal.unit
    return Signal(
        name, signal.value if value is None else value, unit, signal.source, signal.window
    )
