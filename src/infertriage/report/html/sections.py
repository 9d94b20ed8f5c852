"""report.html, level 4: the report's sections, each a function of the `RunReport`.

Takes a `RunReport`; gives HTML fragments: the seven-layer map (every
finding with its evidence, thresholds, explanation, caveat and next steps,
and what each unknown layer misses), the SLO table, the load levels, the
TTFT and ITL distributions, the time series with the load levels shaded,
the trace summary, the go-live checklist and the A/B table (with its
sample plan and looks, from `measures`). Each returns "" when the run has
nothing for it. Every string that is not ours goes through `escape_html`
(`_e`) here; numbers are formatted here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from infertriage.analyze.stats.distribution import Distribution
from infertriage.report.compare import change_text, metric_text
from infertriage.report.compare import verdict_line as compare_verdict
from infertriage.report.diagnosis import evidence_value, slo_value
from infertriage.report.html.markup import badge
from infertriage.report.html.markup import section as _section
from infertriage.report.html.markup import status as _status
from infertriage.report.html.markup import table as _table
from infertriage.report.html.measures import ab_plan_html, saturation_notes
from infertriage.report.html.model import LevelView, RunReport
from infertriage.report.html.svg import cdf_chart, format_axis, legend, time_chart
from infertriage.report.validate import verdict_line as checklist_verdict
from infertriage.schemas import (
    CheckGroup,
    Diagnosis,
    Finding,
    LayerResult,
    SloResult,
    Validity,
)
from infertriage.schemas.text import escape_html as _e

__all__ = [
    "ab_section",
    "checks_section",
    "distributions_section",
    "levels_section",
    "map_section",
    "slo_section",
    "timeline_section",
    "trace_section",
]


# --- the seven-layer map ---------------------------------------------------------------------


def _evidence(finding: Finding) -> str:
    rows = []
    for item in finding.evidence:
        limit = ""
        if item.threshold is not None:
            limit = evidence_value(item.model_copy(update={"value": item.threshold}))
        rows.append(
            [
                f"<code>{_e(item.signal)}</code>",
                _e(evidence_value(item)),
                _e(limit),
                _e(item.source),
            ]
        )
    return _table(["signal", "value", "limit", "source"], rows, "evidence") if rows else ""


def _finding(finding: Finding, primary: str | None) -> str:
    mark = "▶ " if finding.id == primary else ""
    parts = [
        f'<div class="finding f-{_e(finding.status.value)}">',
        f"<h4>{mark}{_e(finding.title)} <small><code>{_e(finding.id)}</code> · score "
        f"{finding.score:.2f} (severity {finding.severity:.2f} × explains "
        f"{finding.explains:.2f})</small></h4>",
    ]
    if finding.explanation:
        parts.append(f"<p>{_e(finding.explanation)}</p>")
    parts.append(_evidence(finding))
    if finding.caveat:
        parts.append(f'<p class="caveat">caveat: {_e(finding.caveat)}</p>')
    if finding.next_steps:
        steps = "".join(f"<li>{_e(step)}</li>" for step in finding.next_steps)
        parts.append(f'<p class="next">Next steps:</p><ol class="next">{steps}</ol>')
    return "".join(parts) + "</div>"


def _layer_row(result: LayerResult, diagnosis: Diagnosis) -> str:
    primary = diagnosis.primary
    is_primary = primary is not None and primary.layer is result.layer
    name = f"▶ {result.layer.value}" if is_primary else result.layer.value
    cell = "".join(_finding(f, primary.finding if primary else None) for f in result.findings)
    if result.missing:
        missing = "".join(f"<li>{_e(line)}</li>" for line in result.missing)
        cell += f'<p class="missing">missing evidence:</p><ul class="missing">{missing}</ul>'
    return (
        f'<tr class="layer l-{_e(result.status.value.replace("/", ""))}"><th>{_e(name)}</th>'
        f"<td>{_status(result.status.value)}</td><td>{cell}</td></tr>"
    )


def _map_summary(diagnosis: Diagnosis) -> str:
    if diagnosis.primary is not None:
        links = [link.finding for link in diagnosis.chain]
        if diagnosis.symptom:
            links.append(diagnosis.symptom)
        chain = f"<br>Chain: {_e(' → '.join(links))}" if len(links) > 1 else ""
        return (
            f'<p class="verdict bad">Primary bottleneck: {_e(diagnosis.primary.layer.value)} '
            f"({_e(diagnosis.primary.finding)}){chain}</p>"
        )
    if diagnosis.unexplained is not None:
        return f'<p class="verdict warn">No primary: {_e(diagnosis.unexplained.line)}.</p>'
    if any(r.passed is False for r in diagnosis.slo):
        return '<p class="verdict warn">No bottleneck found, but an SLO was missed.</p>'
    return '<p class="verdict good">No bottleneck: every SLO holds.</p>'


def map_section(report: RunReport) -> str:
    diagnosis = report.diagnosis
    if diagnosis is None:
        return ""
    rows = "".join(_layer_row(result, diagnosis) for result in diagnosis.layers)
    head = "<thead><tr><th>layer</th><th>status</th><th>findings, evidence, next steps</th>"
    table = f'<table class="map">{head}</tr></thead><tbody>{rows}</tbody></table>'
    client = ""
    if diagnosis.client_bound:
        client = '<p class="caveat">The load client fell behind: its figures are not trusted.</p>'
    return _section("map", "Seven-layer bottleneck map", _map_summary(diagnosis) + client + table)


# --- SLOs and load levels ----------------------------------------------------------------------


def _slo_rows(slos: Sequence[SloResult], level: str | None = None) -> list[list[str]]:
    rows = []
    for slo in slos:
        measured = "n/a" if slo.measured is None else slo_value(slo.measured, slo.unit)
        verdict = {True: "pass", False: "fail", None: "not measured"}[slo.passed]
        row = [_e(level)] if level is not None else []
        rows.append(
            [
                *row,
                f"<code>{_e(slo.name)}</code>",
                _e(slo_value(slo.target, slo.unit)),
                _e(measured),
                _status(verdict),
            ]
        )
    return rows


def slo_section(report: RunReport) -> str:
    if report.diagnosis is not None and report.diagnosis.slo:
        judged = report.diagnosis.judged
        note = f'<p class="dim">{_e(judged.describe())}</p>' if judged is not None else ""
        note += _validity_note(report.diagnosis.validity, "sample")
        rows = _slo_rows(report.diagnosis.slo)
        return _section("slo", "SLOs", _table(["SLO", "target", "measured", ""], rows) + note)
    rows = [row for level in report.levels for row in _slo_rows(level.slo, level.name)]
    if not rows:
        return ""
    return _section("slo", "SLOs", _table(["level", "SLO", "target", "measured", ""], rows))


def _ms(dist: Distribution | None, stat: str) -> str:
    return "–" if dist is None else f"{getattr(dist, stat) * 1e3:,.1f}"


def levels_section(report: RunReport) -> str:
    rows = []
    for level in report.levels:
        s = level.summary
        name = f"▶ {level.name}" if level.name == report.main_level else level.name
        rows.append(
            [
                _e(name),
                f"{s.num_ok}/{s.num_failed}",
                f"{s.request_throughput:,.2f}",
                f"{s.output_throughput:,.0f}",
                f"{s.goodput:,.2f}",
                _ms(s.ttft, "p50"),
                _ms(s.ttft, "p95"),
                _ms(s.ttft, "p99"),
                _ms(s.itl, "p50"),
                _ms(s.itl, "p95"),
                _ms(s.itl, "p99"),
                _ms(s.e2e, "p95"),
                _verdict(level.validity)
                + (f" {badge('over-saturated', 'fail')}" if level.saturation else ""),
            ]
        )
    if not rows:
        return ""
    head = [
        "level",
        "ok/failed",
        "req/s",
        "output tok/s",
        "goodput req/s",
        "TTFT p50",
        "TTFT p95",
        "TTFT p99",
        "ITL p50",
        "ITL p95",
        "ITL p99",
        "E2E p95",
        "validity",
    ]
    note = (
        '<p class="dim">Latencies in ms over each level\'s steady window; ▶ the measured one.</p>'
    )
    errors = [
        f"<li>{_e(level.name)}: {_e(', '.join(f'{kind} {n}' for kind, n in level.summary.errors))}"
        "</li>"
        for level in report.levels
        if level.summary.errors
    ]
    failures = f'<p>Errors:</p><ul class="errors">{"".join(errors)}</ul>' if errors else ""
    invalid = "".join(
        _validity_note(level.validity, _e(level.name))
        for level in report.levels
        if level.validity is not None and not level.validity.valid
    )
    saturated = saturation_notes(report.levels)
    body = _table(head, rows, "num") + note + saturated + failures + invalid
    return _section("levels", "Load levels", body)


def _verdict(validity: Validity | None) -> str:
    if validity is None:
        return "–"
    css = "pass" if validity.valid else "fail"
    return f'<span class="status s-{css}">{validity.verdict}</span>'


def _validity_note(validity: Validity | None, what: str) -> str:
    """'INVALID sample:' and one item per failed check (its reason and what would make it
    valid); 'VALID sample: <the first claim's sample>' when none failed."""
    if validity is None:
        return ""
    if validity.valid:
        sample = [c.figure for c in validity.checks if c.name.startswith("sample")]
        return f'<p class="dim">VALID {what}: {_e(sample[0])}</p>' if sample else ""
    items = "".join(f"<li>{_e(check.line())}</li>" for check in validity.failed)
    head = f'<span class="status s-fail">INVALID</span> {what}'
    return f'<p class="caveat">{head}:</p><ul class="invalid">{items}</ul>'


# --- distributions and time series -------------------------------------------------------------


def _percentiles(levels: Sequence[LevelView], metric: str) -> str:
    rows = []
    for level in levels:
        values = getattr(level, metric)
        if not values.size:
            continue
        p50, p90, p95, p99 = np.percentile(values, [50, 90, 95, 99])
        rows.append(
            [
                _e(level.name),
                f"{values.size:,}",
                *(_e(format_axis(float(v), "s")) for v in (p50, p90, p95, p99)),
            ]
        )
    return _table(["level", "samples", "p50", "p90", "p95", "p99"], rows, "num")


def distributions_section(report: RunReport) -> str:
    body = []
    for metric, title, what in (
        ("ttft_s", "TTFT", "time to first token, per request"),
        ("itl_s", "ITL", "inter-token latency, per output token"),
    ):
        levels = [lv for lv in report.levels if getattr(lv, metric).size]
        chart = cdf_chart(title, [(lv.name, getattr(lv, metric)) for lv in levels])
        if chart:
            body.append(
                f"<h3>{_e(title)} <small>({_e(what)}; cumulative share, log scale)</small></h3>"
                f"{chart}{legend([lv.name for lv in levels])}{_percentiles(levels, metric)}"
            )
    return _section("distributions", "TTFT and ITL distributions", "".join(body)) if body else ""


def timeline_section(report: RunReport) -> str:
    if not report.charts:
        return ""
    span = report.span
    parts = []
    if report.bands:
        names = ", ".join(f"{b.name} {b.start_ts:.1f}–{b.end_ts:.1f} s" for b in report.bands)
        parts.append(f'<p class="dim">Shaded: the load levels, in order — {_e(names)}.</p>')
    for chart in report.charts:
        parts.append(f"<h3>{_e(chart.title)} <small>({_e(chart.unit)})</small></h3>")
        parts.append(time_chart(chart, report.bands, span) + legend(chart.series))
    return _section("timeline", "Over the run", "".join(parts))


# --- trace, checklist, A/B ----------------------------------------------------------------------


def trace_section(report: RunReport) -> str:
    if not report.trace:
        return ""
    rows = [
        [f"<code>{_e(s.name)}</code>", _e(format_axis(s.value, s.unit)), _e(s.unit)]
        for s in report.trace
    ]
    note = '<p class="dim">From the profiler traces captured during (or given to) the run.</p>'
    return _section("trace", "Trace summary", note + _table(["signal", "value", "unit"], rows))


def checks_section(report: RunReport) -> str:
    if not report.checks:
        return ""
    order = list(CheckGroup)
    rows = [
        [_e(c.group.value), f"<code>{_e(c.name)}</code>", _status(c.status.value), _e(c.detail)]
        for c in sorted(report.checks, key=lambda c: order.index(c.group))
    ]
    ready = "good" if "NOT READY" not in checklist_verdict(report.checks) else "bad"
    verdict = f'<p class="verdict {ready}">{_e(checklist_verdict(report.checks))}</p>'
    return _section(
        "checks",
        "Go-live checklist",
        verdict + _table(["group", "check", "status", "detail"], rows),
    )


def ab_section(report: RunReport) -> str:
    result = report.comparison
    if result is None:
        return ""
    tone = {"regression": "bad", "inconclusive": "warn"}.get(result.verdict, "good")
    parts = [
        f"<p>base {_e(result.base)} vs run {_e(result.run)}</p>",
        f'<p class="verdict {tone}">{_e(compare_verdict(result))}</p>',
    ]
    for level in result.levels:
        rows = []
        for m in level.comparison.metrics:
            base = "—" if m.base is None else metric_text(m.base.p50, m.unit)
            run = "—" if m.run is None else metric_text(m.run.p50, m.unit)
            base95 = "—" if m.base is None else metric_text(m.base.p95, m.unit)
            run95 = "—" if m.run is None else metric_text(m.run.p95, m.unit)
            rows.append(
                [
                    _e(m.metric),
                    _e(base),
                    _e(run),
                    _e(change_text(m.change_p50)),
                    _e(base95),
                    _e(run95),
                    _e(change_text(m.change_p95)),
                    f"{m.p_value:.2g}",
                    _status(m.verdict),
                    _e(m.reason),
                ]
            )
        head = [
            "metric",
            "base p50",
            "run p50",
            "Δ p50",
            "base p95",
            "run p95",
            "Δ p95",
            "p",
            "verdict",
            "why",
        ]
        parts.append(f"<h3>{_e(level.base_level)} → {_e(level.run_level)}</h3>")
        parts.append(_table(head, rows, "num ab"))
        parts += [f'<p class="caveat">{_e(w)}</p>' for w in level.comparison.shape]
    parts.append(ab_plan_html(report.ab_plan))
    told = report.ab_plan.verdict if report.ab_plan is not None else None
    if told is not None and told != result.verdict:
        parts.append(
            f'<p class="caveat">compare itself judged this run {_e(told)} (compare.json); '
            "the table above is recomputed from the records at the comparison's alpha.</p>"
        )
    changes = [*result.environment, *result.server_config]
    if changes:
        rows = [[f"<code>{_e(c.key)}</code>", _e(repr(c.base)), _e(repr(c.run))] for c in changes]
        parts.append("<h3>What differs</h3>" + _table(["key", "base", "run"], rows))
    return _section("ab", "A/B comparison", "".join(parts))
