"""report.html, level 4: one self-contained HTML page from a `RunReport`.

Takes a `RunReport`; gives the whole document as a string: styles inline,
charts as inline SVG, no script at all, and a Content-Security-Policy that
lets the page load nothing (`default-src 'none'`): a browser opening it
makes no request, and text a server supplied could not run even if it were
not escaped — it is (`schemas.text.escape_html`, in `sections`). The
header says what run it is; the verdict comes first, then the map, the
SLOs, the checklist, the A/B table, the goodput search, the levels, MLPerf
LoadGen's summary blocks, the distributions, the time series, the trace
summary and the run's facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from infertriage.report.html import measures, sections
from infertriage.report.html.model import RunReport
from infertriage.schemas.text import escape_html as _e

__all__ = ["CSP", "Page", "render_report"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232a;
background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid
#d5d9de;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}h4{font-size:14px;margin:4px 0}
small,.dim{color:#5d6670}code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#eef0f3;
padding:0 3px;border-radius:3px;overflow-wrap:anywhere}
nav a{margin-right:12px;color:#2456a6;text-decoration:none}
table{border-collapse:collapse;margin:6px 0 10px;background:#fff;font-size:13px}
th,td{border:1px solid #d5d9de;padding:4px 7px;vertical-align:top;text-align:left}
thead th{background:#eceff3}table.num td{text-align:right}table.num td:first-child{text-align:left}
table.ab td:last-child{text-align:left}table.map{width:100%}
table.map>tbody>tr>th{white-space:nowrap}
table.evidence{font-size:12px;margin:4px 0}
.status{font-weight:600;padding:1px 6px;border-radius:8px;white-space:nowrap}
.s-ok,.s-pass,.s-improvement{background:#dff3e3;color:#17612b}
.s-warning,.s-marginal,.s-inconclusive{background:#fff1cc;color:#7a5400}
.s-bottleneck,.s-fail,.s-regression{background:#fde0de;color:#a0160c}
.s-unknown,.s-na,.s-skip,.s-unchanged,.s-not.measured{background:#eceff3;color:#5d6670}
.finding{border-left:4px solid #e0a800;padding:2px 10px;margin:6px 0;background:#fffdf5}
.f-bottleneck{border-color:#d0301f;background:#fff7f6}
.caveat{color:#7a5400}.missing{color:#5d6670;margin:2px 0}ol.next{margin:2px 0 6px}
.verdict{font-weight:600;padding:8px 12px;border-radius:6px;margin:8px 0}
.good{background:#dff3e3}.warn{background:#fff1cc}.bad{background:#fde0de}
svg.chart{background:#fff;border:1px solid #d5d9de;max-width:100%;height:auto}
svg .axis{stroke:#5d6670}svg .grid{stroke:#eceff3}
svg .tick{font-size:10px;fill:#5d6670}svg .band-a{fill:#e8eef8}svg .band-b{fill:#f3f5f9}
.legend{margin:2px 0 8px;font-size:12px}.key{margin-right:14px;white-space:nowrap}
.swatch{display:inline-block;width:12px;height:3px;margin-right:5px;vertical-align:middle}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:6px 0}
pre{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;background:#fff;border:1px solid #d5d9de;
padding:8px;overflow-x:auto;white-space:pre}
dl.facts dt{color:#5d6670}dl.facts dd{margin:0;overflow-wrap:anywhere}
"""

_TITLES = {
    "map": "Map",
    "slo": "SLOs",
    "checks": "Checklist",
    "ab": "A/B",
    "maxrate": "Goodput search",
    "levels": "Levels",
    "mlperf": "MLPerf",
    "distributions": "Distributions",
    "timeline": "Over the run",
    "trace": "Trace",
    "facts": "Run",
}


def _header(report: RunReport) -> str:
    created = datetime.fromtimestamp(report.created_unix_s, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    status = "" if report.status == "complete" else f" — {report.status}"
    notes = "".join(f"<li>{_e(note)}</li>" for note in report.notes)
    hints = "".join(f"<li>{_e(hint)}</li>" for hint in report.hints)
    return (
        f"<h1>infertriage {_e(report.command)} report{_e(status)}</h1>"
        f"<p><b>{_e(report.target)}</b> · {_e(created)} · run <code>{_e(str(report.run_dir))}"
        "</code></p>"
        + (f'<ul class="notes">{notes}</ul>' if notes else "")
        + (f'<ul class="dim">{hints}</ul>' if hints else "")
    )


def _facts(report: RunReport) -> str:
    if not report.facts:
        return ""
    rows = "".join(f"<dt>{_e(key)}</dt><dd>{_e(value)}</dd>" for key, value in report.facts)
    return f'<section id="facts"><h2>Run</h2><dl class="facts">{rows}</dl></section>'


@dataclass(frozen=True, slots=True)
class Page:
    """The document, and the ids of the sections it holds in page order."""

    html: str
    sections: tuple[str, ...]


def render_report(report: RunReport) -> Page:
    """The whole page; see the module docstring."""
    parts = {
        "map": sections.map_section(report),
        "slo": sections.slo_section(report),
        "checks": sections.checks_section(report),
        "ab": sections.ab_section(report),
        "maxrate": measures.max_rate_section(report),
        "levels": sections.levels_section(report),
        "mlperf": measures.mlperf_section(report),
        "distributions": sections.distributions_section(report),
        "timeline": sections.timeline_section(report),
        "trace": sections.trace_section(report),
        "facts": _facts(report),
    }
    shown = {key: part for key, part in parts.items() if part}
    nav = "".join(f'<a href="#{key}">{_TITLES[key]}</a>' for key in shown)
    title = f"infertriage {report.command}: {report.target}"
    html = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>{_header(report)}<nav>{nav}</nav>{''.join(shown.values())}</main>"
        "</body></html>\n"
    )
    return Page(html, tuple(shown))
