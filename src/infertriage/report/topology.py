"""report, level 4: `topology` on screen (rich tables) and as one JSON document.

Takes a `TopologyReport`; gives the GPU links, each nccl-tests run (its bus
bandwidth at a few sizes) and, per TP degree, whether the measured
interconnect carries the planned batch. GPU names and links come from the
user's files and are shown as data.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infertriage.plan.topology import NcclRun, TopologyReport
from infertriage.schemas.text import terminal_text
from infertriage.schemas.units import format_bytes, format_seconds

__all__ = ["TOPOLOGY_SCHEMA", "render_topology", "topology_to_json"]

TOPOLOGY_SCHEMA = "infertriage.topology/v1"
_SHOWN_SIZES = (64 * 1024, 1024**2, 16 * 1024**2, 256 * 1024**2)


def _run_json(run: NcclRun) -> dict[str, object]:
    return {
        "num_ranks": run.num_ranks,
        "nccl_tests_version": run.version or None,
        "avg_busbw_bytes_per_s": run.avg_busbw_bytes_per_s,
        "sizes": [
            {
                "size_bytes": s.size_bytes,
                "time_s": s.time_s,
                "busbw_bytes_per_s": s.busbw_bytes_per_s,
            }
            for s in run.sizes
        ],
    }


def topology_to_json(report: TopologyReport) -> dict[str, object]:
    i, topo = report.inputs, report.topo
    return {
        "schema": TOPOLOGY_SCHEMA,
        "model": i.model.name,
        "gpu": i.gpu.name,
        "concurrency": i.concurrency,
        "comm_share_limit": report.comm_share_limit,
        "gpus": list(topo.gpus) if topo else [],
        "links": (
            [
                {"a": topo.gpus[a], "b": topo.gpus[b], "link": link}
                for (a, b), link in topo.links.items()
            ]
            if topo
            else []
        ),
        "nccl_tests": [_run_json(run) for run in report.runs],
        "tp": [
            {
                "tp": v.tp,
                "gpus": list(v.gpus),
                "link": v.link or None,
                "message_bytes": v.message_bytes,
                "allreduce_s": v.allreduce_s,
                "measured_ranks": v.measured_ranks,
                "decode_step_s": v.step_s,
                "comm_share": v.comm_share,
                "carries": v.carries,
                "reason": v.reason,
            }
            for v in report.verdicts
        ],
    }


def _runs_table(runs: tuple[NcclRun, ...]) -> Table:
    table = Table(title="nccl-tests all_reduce_perf: bus bandwidth", title_justify="left")
    table.add_column("ranks", justify="right")
    for size in _SHOWN_SIZES:
        table.add_column(format_bytes(size), justify="right")
    table.add_column("version")
    for run in runs:
        cells = [f"{run.busbw_at(size) / 1e9:,.1f} GB/s" for size in _SHOWN_SIZES]
        table.add_row(str(run.num_ranks), *cells, terminal_text(run.version or "-"))
    return table


def _tp_table(report: TopologyReport) -> Table:
    title = f"TP degrees at batch ≤ {report.inputs.concurrency} ({report.inputs.model.name})"
    table = Table(title=terminal_text(title), title_justify="left")
    for name in ("TP", "GPUs", "link", "all-reduce", "comm share", "carries"):
        table.add_column(name, justify="right" if name != "GPUs" else "left")
    for v in report.verdicts:
        table.add_row(
            str(v.tp),
            terminal_text(",".join(v.gpus) or "-"),
            terminal_text(v.link or "-"),
            format_seconds(v.allreduce_s) if v.allreduce_s is not None else "catalogue",
            f"{v.comm_share:.0%}",
            Text("yes", style="green") if v.carries else Text("no", style="red bold"),
        )
    return table


def render_topology(report: TopologyReport, console: Console) -> None:
    parts: list[Table | Text] = []
    if report.runs:
        parts.append(_runs_table(report.runs))
    parts.append(_tp_table(report))
    lines = Text()
    for v in report.verdicts:
        lines.append(f"TP={v.tp}: {terminal_text(v.reason)}.\n")
    parts.append(lines)
    console.print(Group(*parts))
