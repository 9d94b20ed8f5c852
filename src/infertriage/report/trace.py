"""report, level 4: the `trace` result on screen (rich) and as one JSON document.

Takes a `TraceReport`; gives the terminal summary (ranks, GPU time, launches
and steps, idle time by cause with the host work behind host-starved gaps,
CUDA-graph replays by module, kernel mix, communication, memcpy, then the top findings of the
kernel, scheduling, parallelism and hardware layers — the diagnose rules'
verdicts, each with its evidence and the threshold applied) and `trace_to_json`, which holds
every signal (name, value, unit, source, window), the findings, the ranks,
the host work behind idle gaps, graph replays by module and the heaviest
kernels (schema `infertriage.trace/v1`). Kernel names, devices,
paths and the attention backend come from the trace file: shown as data
(`schemas.text`).
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infertriage.analyze.trace import TraceReport
from infertriage.analyze.trace.idle import IdleCause
from infertriage.report.diagnosis import evidence_text
from infertriage.schemas.layers import Layer, Status
from infertriage.schemas.text import show_controls, terminal_text
from infertriage.schemas.units import format_bytes, format_seconds

__all__ = ["TRACE_LAYERS", "TRACE_SCHEMA", "render_trace", "trace_to_json"]

TRACE_SCHEMA = "infertriage.trace/v1"
# the layers whose rules a trace alone can fire
TRACE_LAYERS = (Layer.KERNEL, Layer.SCHEDULING, Layer.PARALLELISM, Layer.HARDWARE)
_TOP_FINDINGS = 3
_NAME_WIDTH = 72
_MIN_NAME_WIDTH = 16
_FIGURES_WIDTH = 42  # category, count, GPU time and the borders
_TOP_HOST_OPS = 3
_CAUSE_TEXT = {
    IdleCause.SYNC: "waiting on a sync (host blocked, then launched late)",
    IdleCause.COPY: "waiting on a copy",
    IdleCause.BETWEEN_STEPS: "between steps",
    IdleCause.HOST_STARVED: "host-starved (CPU busy)",
    IdleCause.LAUNCH_OVERHEAD: "launch overhead",
    IdleCause.HELD: "launched, then held (cause not traced)",
    IdleCause.UNTRACED: "untraced host time",
    IdleCause.OTHER: "other",
}


def trace_to_json(report: TraceReport) -> dict[str, object]:
    return {
        "schema": TRACE_SCHEMA,
        "paths": list(report.paths),
        "log": report.log_path,
        "hta_convention": report.hta_convention,
        "notes": list(report.notes),
        "idle_host_ops": [{"name": n, "idle_s": s} for n, s in report.idle_host_ops],
        "graph_modules": [
            {
                "module": g.module,
                "launches": g.num_launches,
                "kernels": g.num_kernels,
                "kernel_s": g.kernel_ns * 1e-9,
            }
            for g in report.graph_modules
        ],
        "attention_backend": report.attention_backend,
        "ranks": [
            {
                "rank": r.rank,
                "path": r.path,
                "format": r.fmt,
                "devices": list(r.devices),
                "num_kernels": r.num_kernels,
                "span_s": r.span_s,
                "busy_s": r.busy_s,
                "compute_s": r.compute_s,
                "comm_s": r.comm_s,
                "steps": r.steps,
                "step_source": r.step_source,
                "kernels_per_step": r.kernels_per_step,
            }
            for r in report.ranks
        ],
        "signals": [
            {
                "name": s.name,
                "value": s.value,
                "unit": s.unit,
                "source": s.source,
                "window": list(s.window) if s.window is not None else None,
            }
            for s in report.signals
        ],
        "findings": [f.model_dump(mode="json") for f in report.findings],
        "top_kernels": [
            {
                "name": k.name,
                "category": k.category.name.lower(),
                "count": k.count,
                "total_s": k.total_ns * 1e-9,
            }
            for k in report.mix.top
        ],
    }


def _pct(report: TraceReport, name: str) -> str:
    value = report.value(name)
    return "–" if value is None else f"{value:.1%}"


def _secs(report: TraceReport, name: str) -> str:
    value = report.value(name)
    return "–" if value is None else format_seconds(value)


def _count(report: TraceReport, name: str, digits: int = 0) -> str:
    value = report.value(name)
    return "–" if value is None else f"{value:,.{digits}f}"


def _overview(report: TraceReport) -> Table:
    table = Table(title="GPU time", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = (
        ("traced span (all GPUs)", _secs(report, "trace.gpu_span_s")),
        ("busy", _pct(report, "trace.gpu_busy_fraction")),
        ("idle (by cause below)", _pct(report, "trace.gpu_idle_fraction")),
        (
            "idle: host wait / kernel-to-kernel",
            f"{_secs(report, 'trace.idle.host_wait_s')} / "
            f"{_secs(report, 'trace.idle.kernel_to_kernel_s')}",
        ),
        ("kernels", _count(report, "trace.kernels")),
        ("launch latency p50 / p95", _launch_latency(report)),
        ("  queueing p50 / queued / depth p50", _queueing(report)),
        ("  launch overhead p50 / p95", _overhead(report)),
        ("short kernels (GPU < launch CPU)", _pct(report, "trace.short_kernel_fraction")),
        ("CUDA-graph share of kernel time", _pct(report, "trace.cuda_graph_fraction")),
        ("steps / kernels per step", _steps(report)),
        ("sync calls per step", _count(report, "trace.sync_calls_per_step", 1)),
        ("attention backend", report.attention_backend),
        (
            "NCCL share / overlap",
            f"{_pct(report, 'trace.nccl_fraction')} / "
            f"{_pct(report, 'trace.comm_overlap_fraction')}",
        ),
        ("memcpy HtoD / DtoH (pageable share)", _copies(report)),
        ("recompilations", _count(report, "trace.recompilations")),
    )
    for what, value in rows:
        table.add_row(what, terminal_text(value))
    return table


def _launch_latency(report: TraceReport) -> str:
    p50 = _secs(report, "trace.launch_latency_p50_s")
    return f"{p50} / {_secs(report, 'trace.launch_latency_p95_s')}"


def _queueing(report: TraceReport) -> str:
    queued = _pct(report, "trace.launch_queued_fraction")
    depth = _count(report, "trace.queue_depth_p50")
    return f"{_secs(report, 'trace.launch_queue_p50_s')} / {queued} / {depth}"


def _idle(report: TraceReport) -> Table:
    """Idle time by cause, with shares; the host-starved line names the host's top work."""
    table = Table(title="Idle GPU time by cause", title_justify="left", show_header=False)
    table.add_column("cause")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    for cause, said in _CAUSE_TEXT.items():
        seconds = report.value(f"trace.idle.cause.{cause.label}_s")
        if not seconds:
            continue
        text = said
        if cause is IdleCause.HOST_STARVED and report.idle_host_ops:
            top = ", ".join(name for name, _ in report.idle_host_ops[:_TOP_HOST_OPS])
            text = f"{said} in {top}"
        share = _pct(report, f"trace.idle.cause.{cause.label}_fraction")
        table.add_row(terminal_text(text), format_seconds(seconds), share)
    return table


def _graphs(report: TraceReport, name_width: int) -> Table:
    table = Table(title="CUDA-graph replays by module", title_justify="left")
    table.add_column("module", no_wrap=True, overflow="ellipsis", max_width=name_width)
    table.add_column("launches", justify="right")
    table.add_column("kernels", justify="right")
    table.add_column("GPU time", justify="right")
    for g in report.graph_modules[:8]:
        table.add_row(
            terminal_text(g.module),
            f"{g.num_launches:,}",
            f"{g.num_kernels:,}",
            format_seconds(g.kernel_ns * 1e-9),
        )
    return table


def _overhead(report: TraceReport) -> str:
    p50 = _secs(report, "trace.launch_overhead_p50_s")
    return f"{p50} / {_secs(report, 'trace.launch_overhead_p95_s')}"


def _steps(report: TraceReport) -> str:
    steps = report.signal("trace.steps")
    if steps is None:
        return "not found"
    source = steps.source.removeprefix("trace:")
    return f"{steps.value:.0f} / {_count(report, 'trace.kernels_per_step', 1)} ({source})"


def _copies(report: TraceReport) -> str:
    htod = report.value("trace.memcpy.htod_bytes") or 0.0
    dtoh = report.value("trace.memcpy.dtoh_bytes") or 0.0
    pageable = _pct(report, "trace.memcpy.pageable_fraction")
    return f"{format_bytes(htod)} / {format_bytes(dtoh)} ({pageable})"


def _mix(report: TraceReport, name_width: int) -> Table:
    table = Table(title="Heaviest kernels", title_justify="left")
    table.add_column("kernel", no_wrap=True, overflow="ellipsis", max_width=name_width)
    table.add_column("category")
    table.add_column("count", justify="right")
    table.add_column("GPU time", justify="right")
    for kernel in report.mix.top[:8]:
        name = kernel.name.removeprefix("void ")
        table.add_row(
            terminal_text(name),
            kernel.category.name.lower(),
            f"{kernel.count:,}",
            format_seconds(kernel.total_ns * 1e-9),
        )
    return table


def _findings(report: TraceReport) -> Text:
    text = Text()
    for layer in TRACE_LAYERS:
        found = [f for f in report.findings if f.layer == layer][:_TOP_FINDINGS]
        text.append(f"\n{layer.value}: ", style="bold")
        if not found:
            text.append("no finding\n", style="green")
            continue
        text.append("\n")
        for finding in found:
            style = "red" if finding.status is Status.BOTTLENECK else "yellow"
            text.append(f"  [{finding.status}] ", style=style)
            text.append(f"{show_controls(finding.title)} (score {finding.score:.2f})\n")
            text.append(f"      {show_controls(evidence_text(finding))}\n", style="dim")
            for step in finding.next_steps[:1]:
                text.append(f"      → {show_controls(step)}\n", style="dim")
    return text


def render_trace(report: TraceReport, console: Console) -> None:
    ranks = report.ranks
    devices = sorted({d for r in ranks for d in r.devices})
    formats = sorted({r.fmt for r in ranks})
    console.print(
        terminal_text(
            f"{len(ranks)} rank(s) from {len(report.paths)} trace(s) ({', '.join(formats)}) on "
            f"{', '.join(devices) or 'unknown GPU'}"
            + (
                " — HTA's convention: each rank's last profiler step left out"
                if report.hta_convention
                else ""
            ),
            style="bold",
        )
    )
    # A long (templated) kernel name gives way to the figures beside it on a narrow terminal.
    name_width = max(_MIN_NAME_WIDTH, min(_NAME_WIDTH, console.width - _FIGURES_WIDTH))
    parts: list[Table | Text] = [_overview(report), _idle(report)]
    if report.graph_modules:
        parts.append(_graphs(report, name_width))
    parts += [_mix(report, name_width), _findings(report)]
    console.print(Group(*parts))
