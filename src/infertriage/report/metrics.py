"""report, level 4: the `metrics` view on screen (rich tables) and as one JSON document.

Takes a `MetricsView`; gives `render_metrics` (the engine, then per source a
table of the present metrics with their values, rates and quantiles with
bounds, then what is absent with how to enable it and what the engine does
not support) and `metrics_to_json` (schema `infertriage.metrics/v1`; SI
units; an open-ended quantile bound is null). Names, label values, server
configuration, events and notes come from the server or a file: every cell
and line reaches rich as data (`schemas.text`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from infertriage.analyze.signals.prom import QuantileEstimate
from infertriage.collect import Availability, DerivedFigure, MetricEntry, MetricsView
from infertriage.schemas import MetricKind
from infertriage.schemas.text import show_controls, terminal_text
from infertriage.schemas.units import format_bytes, format_seconds

__all__ = ["METRICS_SCHEMA", "format_value", "metrics_to_json", "render_metrics"]

METRICS_SCHEMA = "infertriage.metrics/v1"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _quantile_json(q: QuantileEstimate) -> dict[str, Any]:
    return {"q": q.q, "value": q.value, "lower": _finite(q.lower), "upper": _finite(q.upper)}


def _entry_json(entry: MetricEntry) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": entry.name,
        "source": entry.source,
        "status": str(entry.status),
        "raw_name": entry.raw_name,
        "unit": entry.unit,
        "kind": str(entry.kind),
        "layer": str(entry.layer),
        "note": entry.note,
        "num_series": entry.num_series,
        "value": _finite(entry.value),
    }
    if entry.gauge is not None:
        g = entry.gauge
        document["window"] = {"mean": g.mean, "min": g.min, "max": g.max, "p95": g.p95}
    if entry.counter is not None:
        c = entry.counter
        document["window"] = {
            "increase": c.increase,
            "rate_per_s": c.rate_per_s,
            "num_resets": c.num_resets,
        }
    if entry.histogram is not None:
        h = entry.histogram
        document["histogram"] = {
            "count": h.count,
            "sum": _finite(h.sum),
            "mean": _finite(h.mean),
            "num_resets": h.num_resets,
            "quantiles": [_quantile_json(q) for q in entry.quantiles],
        }
    return document


def metrics_to_json(view: MetricsView) -> dict[str, Any]:
    """The whole view as one JSON-ready document."""
    window = None
    if view.window is not None:
        window = {
            "start_ts": view.window[0],
            "end_ts": view.window[1],
            "duration_s": view.window[1] - view.window[0],
        }
    return {
        "schema": METRICS_SCHEMA,
        "source": view.source,
        "engine": view.engine,
        "engine_title": view.engine_title,
        "exporters": list(view.exporters),
        "window": window,
        "num_scrapes": view.num_scrapes,
        "metrics": [_entry_json(e) for e in view.entries],
        "derived": [
            {"name": d.name, "value": d.value, "unit": d.unit, "formula": d.formula}
            for d in view.derived
        ],
        "events": [
            {"t": e.t, "target": e.target, "kind": e.kind, "detail": e.detail} for e in view.events
        ],
        "server_config": view.server_config.model_dump(mode="json") if view.server_config else None,
        "roles": [{"name": r.name, "value": r.value, "unit": r.unit} for r in view.roles],
        "notes": list(view.notes),
    }


def format_value(value: float | None, unit: str) -> str:
    """A value for the screen in its unit: ms, GiB, %, tok/s, MHz."""
    if value is None or not math.isfinite(value):  # NaN and ±Inf as Prometheus writes them
        return "—" if value is None else "NaN" if math.isnan(value) else f"{value:+}".title()
    if value == 0:
        return "0"
    if unit == "s":
        return format_seconds(value)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "bytes/s":
        return format_bytes(value) + "/s"
    if unit == "fraction":
        return f"{value * 100:.1f} %"
    if unit == "Hz":
        return f"{value / 1e6:.0f} MHz"
    if unit == "tokens/s":
        return f"{value:,.1f} tok/s"
    if unit == "W":
        return f"{value:.1f} W"
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.4g}"


def _quantile_cell(entry: MetricEntry, q: float) -> str:
    found = next((e for e in entry.quantiles if e.q == q), None)
    if found is None:
        return ""
    if found.open_ended:
        return f"> {format_value(found.value, entry.unit)}"
    return format_value(found.value, entry.unit)


def _bucket_cell(entry: MetricEntry) -> str:
    """Where the true p99 lies: the bucket the interpolation happened in."""
    found = next((e for e in entry.quantiles if e.q == 0.99), None)
    if found is None:
        return ""
    if found.open_ended:
        return f"above the last bucket ({format_value(found.lower, entry.unit)})"
    return f"{format_value(found.lower, entry.unit)} – {format_value(found.upper, entry.unit)}"


def _window_text(entry: MetricEntry) -> str:
    if entry.counter is not None:
        rate = entry.counter.rate_per_s
        text = f"{format_value(rate, entry.unit)}/s" if rate is not None else "—"
        resets = entry.counter.num_resets
        return text + (f"  ({resets} reset{'s' if resets > 1 else ''})" if resets else "")
    if entry.gauge is not None:
        g = entry.gauge
        return f"mean {format_value(g.mean, entry.unit)}  max {format_value(g.max, entry.unit)}"
    return ""


def _cells(*cells: str) -> list[Text]:
    return [terminal_text(cell) for cell in cells]


def _scalar_table(title: str, entries: Sequence[MetricEntry], windowed: bool) -> Table:
    table = Table(title=terminal_text(title), title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("value" if not windowed else "last", justify="right", no_wrap=True)
    if windowed:
        table.add_column("over the window", no_wrap=True)
    table.add_column("raw name", style="dim", overflow="fold")
    for entry in entries:
        cells = [entry.name, format_value(entry.value, entry.unit)]
        cells += [_window_text(entry)] if windowed else []
        table.add_row(*_cells(*cells, entry.raw_name or ""))
    return table


def _histogram_table(entries: Sequence[MetricEntry], windowed: bool) -> Table:
    title = "Histograms, " + ("bucket deltas over the window" if windowed else "since the start")
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("metric", style="bold", no_wrap=True)
    for name in ("n", "mean", "p50", "p95", "p99"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("p99 lies in", no_wrap=True)
    for entry in entries:
        h = entry.histogram
        count = f"{h.count:,.0f}" if h is not None else "0"
        mean = format_value(h.mean if h is not None else None, entry.unit)
        cells = [_quantile_cell(entry, q) for q in (0.5, 0.95, 0.99)]
        table.add_row(*_cells(entry.name, count, mean, *cells, _bucket_cell(entry)))
    return table


def _missing_table(entries: Sequence[MetricEntry]) -> Table:
    table = Table(title="Absent from this server's metrics", title_justify="left", show_edge=False)
    table.add_column("metric", style="bold yellow")
    table.add_column("why, and how to enable it")
    for entry in entries:
        table.add_row(*_cells(entry.name, entry.note))
    return table


def _render_source(view: MetricsView, source: str, console: Console) -> None:
    ours = [e for e in view.entries if e.source == source]
    present = [e for e in ours if e.status is Availability.PRESENT]
    scalars = [e for e in present if e.kind is not MetricKind.HISTOGRAM]
    histograms = [e for e in present if e.kind is MetricKind.HISTOGRAM]
    absent = [e for e in ours if e.status is Availability.ABSENT]
    unsupported = [e.name for e in ours if e.status is Availability.UNSUPPORTED]
    console.print()
    title = (
        f"{source}: {len(present)} present, {len(absent)} absent, {len(unsupported)} unsupported"
    )
    console.print(_scalar_table(title, scalars, bool(view.window)))
    if histograms:
        console.print(_histogram_table(histograms, bool(view.window)))
    if absent:
        console.print(_missing_table(absent))
    if unsupported:
        names = ", ".join(unsupported)
        console.print(terminal_text(f"Not exported by {source}: {names}", "dim"))


def render_metrics(view: MetricsView, console: Console) -> None:
    """The view on the terminal."""
    engine = view.engine_title or "none"
    extra = f" + {', '.join(view.exporters)}" if view.exporters and view.engine else ""
    if view.exporters and not view.engine:
        extra = f" ({', '.join(view.exporters)} only)"
    span = (
        f"{view.num_scrapes} scrapes over {format_seconds(view.duration_s or 0.0)}"
        if view.window
        else "one scrape"
    )
    line = show_controls(f"{engine}{extra}  ({view.source}, {span})")
    console.print(Text.assemble(("Engine: ", "bold"), line))
    for source in dict.fromkeys(e.source for e in view.entries):
        _render_source(view, source, console)
    _render_tail(view, console)


def _roles_table(figures: dict[str, DerivedFigure]) -> Table | None:
    roles = [r for r in ("prefill", "decode") if f"pd.{r}_instances" in figures]
    if not roles:
        return None
    title = "Prefill/decode roles (label pd_role)"
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for name in ("role", "instances", "running each", "waiting each", "KV used"):
        table.add_column(name, justify="left" if name == "role" else "right", no_wrap=True)
    for role in roles:
        cells = [role]
        for figure, unit in (
            ("instances", "1"),
            ("running_per_instance", "requests"),
            ("waiting_per_instance", "requests"),
            ("kv_usage", "fraction"),
        ):
            found = figures.get(f"pd.{role}_{figure}")
            cells.append(format_value(found.value if found else None, unit))
        table.add_row(*_cells(*cells))
    return table


_TRANSFER = (  # the transfer line's parts: signal, what it is called
    ("pd.transfer_count", "{} transfers"),
    ("pd.transfer_time_mean_s", "mean {}"),
    ("pd.transfer_time_p90_s", "p90 {}"),
    ("pd.transfer_bytes_mean", "{} each"),
    ("pd.transfer_bytes_per_s", "{} achieved"),
    ("pd.transfer_failures", "{} failed"),
    ("pd.transfer_queue", "{} queued for a transfer"),
    ("pd.transfer_ttft_share", "{} of the servers' TTFT (prefill + decode)"),
)


def _render_roles(view: MetricsView, console: Console) -> None:
    """A P/D deployment role by role, its KV transfers; prefix hits per data-parallel rank."""
    figures = {r.name: r for r in view.roles}
    table = _roles_table(figures)
    if table is not None:
        console.print()
        console.print(table)
    parts = [
        text.format(format_value(figures[name].value, figures[name].unit))
        for name, text in _TRANSFER
        if name in figures
    ]
    if parts:
        console.print(terminal_text("KV transfers, prefill → decode: " + ", ".join(parts)))
    role = figures.get("dp.role")
    if role is not None:
        which = {1.0: "prefill", 2.0: "decode"}.get(role.value, "?")
        console.print(
            terminal_text(f"Data-parallel ranks compared within a role: the {which} instances")
        )
    ranks = sorted(n for n in figures if n.startswith("dp.prefix_hit_rate_by_rank."))
    if ranks:
        each = ", ".join(
            f"{n.rsplit('.', 1)[1]}: {format_value(figures[n].value, 'fraction')}" for n in ranks
        )
        server = figures.get("dp.prefix_hit_rate")
        total = f" (server {format_value(server.value, 'fraction')})" if server else ""
        console.print(terminal_text(f"Prefix-cache hit rate by rank{total}: {each}"))


def _render_tail(view: MetricsView, console: Console) -> None:
    _render_roles(view, console)
    for figure in view.derived:
        value = format_value(figure.value, figure.unit)
        console.print(terminal_text(f"{figure.name} = {value}  ({figure.formula})"))
    for event in view.events:
        line = f"{event.kind} at {event.t:.1f} s ({event.target}): {event.detail}"
        console.print(terminal_text(line, "red"))
    config = view.server_config
    if config is not None:
        known = {
            key: value
            for key, value in config.model_dump(mode="json").items()
            if value not in (None, [], {}) and key not in {"details", "answered", "notes"}
        }
        if known:
            console.print(
                Text("Server config: ", style="bold")
                + terminal_text(", ".join(f"{k}={v}" for k, v in known.items()))
            )
    for note in view.notes:
        console.print(terminal_text(f"note: {note}", "dim"))
