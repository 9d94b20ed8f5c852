"""report, level 4: the Grafana dashboard, built with Grafana's own Python SDK.

Takes the recording rules made, the engine's and dcgm-exporter's
`Exporter`s, `AlertLimits` and `Timing`; gives the dashboard as JSON text
(`grafana-foundation-sdk`'s builders and encoder: its schema, not a
hand-written one) with one row per layer — application (TTFT, ITL and E2E
percentiles with the SLO lines; requests by outcome and code), scheduling
(tokens/s; running and waiting), memory (KV usage and preemptions; prefix
cache hit rate; GPU memory over time), hardware (GPU utilisation beside SM,
tensor and DRAM active: the "util lies" panel) — and a fleet row (replicas
side by side), and the `LeftOut` panels. The SDK is the `monitor` extra; its
absence is a `UserError` naming the install command.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from infertriage.report.monitoring.model import AlertLimits, LeftOut, Recorded, Timing
from infertriage.report.monitoring.promql import Exporter, duration
from infertriage.schemas import UserError

__all__ = ["DASHBOARD_UID", "dashboard_json"]

DASHBOARD_UID = "infertriage-serving"
_R = Recorded


@dataclass(frozen=True, slots=True)
class _Query:
    expr: str
    legend: str


@dataclass(frozen=True, slots=True)
class _Panel:
    title: str
    queries: tuple[_Query, ...]
    unit: str
    description: str = ""
    line: float | None = None  # an SLO or alert line
    span: int = 8


def _sdk() -> Any:
    try:
        from grafana_foundation_sdk.builders import (  # noqa: PLC0415 - an optional extra
            common,
            dashboard,
            prometheus,
            timeseries,
        )
        from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: PLC0415
        from grafana_foundation_sdk.models import common as common_models  # noqa: PLC0415
        from grafana_foundation_sdk.models import dashboard as models  # noqa: PLC0415
    except ImportError as err:
        raise UserError(
            "monitor-config builds the Grafana dashboard with grafana-foundation-sdk: "
            "pip install 'infertriage[monitor]' (or grafana-foundation-sdk)."
        ) from err
    return dashboard, timeseries, prometheus, common, common_models, models, JSONEncoder


def _percentiles(title: str, records: Sequence[Recorded], line: float | None) -> _Panel:
    queries = tuple(_Query(r.value, f"{r.value.rsplit(':', 1)[1]} {{{{job}}}}") for r in records)
    return _Panel(title, queries, "s", "server-side, from the engine's histogram", line)


def _application(engine: Exporter, limits: AlertLimits, window: str) -> list[_Panel]:
    outcomes = [
        q
        for name in ("requests.failed", "requests.finished")
        for q in (engine.raw_rate(name, window),)
        if q is not None
    ]
    return [
        _percentiles(
            "TTFT (SLO line)", (_R.TTFT_P50, _R.TTFT_P95, _R.TTFT_P99), limits.slo_ttft_p95_s
        ),
        _percentiles("ITL (SLO line)", (_R.ITL_P50, _R.ITL_P95, _R.ITL_P99), limits.slo_itl_p95_s),
        _percentiles("E2E latency", (_R.E2E_P50, _R.E2E_P95, _R.E2E_P99), None),
        _Panel(
            "Requests by outcome and code",
            tuple(_Query(q, "__auto") for q in outcomes),
            "reqps",
            "each series keeps the engine's own labels (finished_reason, err, …)",
            span=12,
        ),
        _Panel(
            "Failed requests (ratio)",
            (_Query(_R.ERROR_RATIO, "{{job}}"),),
            "percentunit",
            line=limits.error_rate,
            span=12,
        ),
    ]


def _scheduling() -> list[_Panel]:
    return [
        _Panel(
            "Tokens/s",
            (
                _Query(f"sum by (job) ({_R.GENERATION_TOKENS})", "generated {{job}}"),
                _Query(f"sum by (job) ({_R.PROMPT_TOKENS})", "prompt {{job}}"),
            ),
            "short",
            span=12,
        ),
        _Panel(
            "Running and waiting requests",
            (
                _Query(f"sum by (job) ({_R.RUNNING})", "running {{job}}"),
                _Query(f"sum by (job) ({_R.WAITING})", "waiting {{job}}"),
            ),
            "short",
            span=12,
        ),
    ]


def _memory(limits: AlertLimits) -> list[_Panel]:
    return [
        _Panel(
            "KV cache usage",
            (_Query(_R.KV_USAGE, "{{instance}}"),),
            "percentunit",
            line=limits.kv_full,
            span=6,
        ),
        _Panel("Preemptions/s", (_Query(_R.PREEMPTIONS, "{{instance}}"),), "short", span=6),
        _Panel(
            "Prefix-cache hit rate",
            (_Query(_R.PREFIX_HIT_RATE, "{{instance}}"),),
            "percentunit",
            span=6,
        ),
        _Panel(
            "GPU memory used",
            (_Query(_R.GPU_FB_USED, "{{instance}} GPU {{gpu}}"),),
            "bytes",
            "creeping up with a steady load is a leak",
            span=6,
        ),
    ]


def _hardware(gpu: Exporter) -> list[_Panel]:
    names = (
        ("gpu.util", "GPU util (time a kernel ran)"),
        ("gpu.sm_active", "SM active"),
        ("gpu.tensor_active", "tensor active"),
        ("gpu.dram_active", "DRAM active"),
    )
    queries = tuple(
        _Query(expr, f"{label} {{{{instance}}}} GPU {{{{gpu}}}}")
        for name, label in names
        if (expr := gpu.gauge(name, "max", gpu.by)) is not None
    )
    return [
        _Panel(
            "GPU util beside SM, tensor and DRAM active ('util lies')",
            queries,
            "percentunit",
            "GPU util counts the time any kernel ran; SM active counts the share of SMs at "
            "work. 100 % util at 30 % SM active is a GPU waiting on small kernels",
            span=24,
        )
    ]


def _fleet() -> list[_Panel]:
    return [
        _Panel(
            "Generated tokens/s per replica",
            (_Query(_R.GENERATION_TOKENS, "{{instance}}"),),
            "short",
        ),
        _Panel("Waiting requests per replica", (_Query(_R.WAITING, "{{instance}}"),), "short"),
        _Panel("KV usage per replica", (_Query(_R.KV_USAGE, "{{instance}}"),), "percentunit"),
    ]


def _usable(panel: _Panel, recorded: Collection[str]) -> _Panel | None:
    """The panel with the queries whose recorded series exist; None when none is left."""
    kept = tuple(
        q
        for q in panel.queries
        if not any(r.value in q.expr and r.value not in recorded for r in _R)
    )
    return (
        None
        if not kept
        else _Panel(panel.title, kept, panel.unit, panel.description, panel.line, panel.span)
    )


def _build(sdk: Any, panel: _Panel) -> Any:
    dashboard, timeseries, prometheus, common, common_models, models, _ = sdk
    built = (
        timeseries.Panel()
        .title(panel.title)
        .unit(panel.unit)
        .span(panel.span)
        .height(8)
        .datasource(models.DataSourceRef(type_val="prometheus", uid="${datasource}"))
    )
    if panel.description:
        built = built.description(panel.description)
    for index, query in enumerate(panel.queries):
        target = prometheus.Dataquery().expr(query.expr).legend_format(query.legend)
        built = built.with_target(target.ref_id(chr(ord("A") + index)))
    if panel.unit == "percentunit":
        built = built.min(0)
    if panel.line is not None:
        steps = [models.Threshold(None, "green"), models.Threshold(panel.line, "red")]
        style = common.GraphThresholdsStyleConfig().mode(
            common_models.GraphTresholdsStyleMode.DASHED
        )
        config = dashboard.ThresholdsConfig().mode(models.ThresholdsMode.ABSOLUTE).steps(steps)
        built = built.thresholds(config).thresholds_style(style)
    return built


def dashboard_json(
    title: str,
    recorded: Collection[str],
    exporters: tuple[Exporter, Exporter],
    limits: AlertLimits,
    timing: Timing,
) -> tuple[str, list[LeftOut]]:
    """The dashboard's JSON and the panels left out (no series the engine feeds)."""
    engine, gpu = exporters  # the engine's and dcgm-exporter's
    sdk = _sdk()
    dashboard, *_, encoder = sdk
    window = duration(timing.rate_window_s)
    rows = (
        ("application: latency against the SLOs, errors", _application(engine, limits, window)),
        ("scheduling: throughput and queue", _scheduling()),
        ("memory: KV cache, preemptions, prefix cache, GPU memory", _memory(limits)),
        ("hardware: GPU util beside what the SMs do", _hardware(gpu)),
        ("fleet: replicas side by side", _fleet()),
    )
    board = (
        dashboard.Dashboard(title)
        .uid(DASHBOARD_UID)
        .tags(["infertriage", "llm-inference"])
        .refresh("30s")
        .time("now-3h", "now")
        .with_variable(
            dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")
        )
    )
    left: list[LeftOut] = []
    for row_title, panels in rows:
        board = board.with_row(dashboard.Row(row_title))
        for panel in panels:
            usable = _usable(panel, recorded)
            if usable is None:
                left.append(LeftOut(panel.title, "no series of this engine feeds it"))
            else:
                board = board.with_panel(_build(sdk, usable))
    return json.dumps(board.build(), cls=encoder, indent=2) + "\n", left
