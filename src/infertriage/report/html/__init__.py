"""report.html, level 4: a run as one self-contained HTML page (`infertriage report`).

`RunReport` (`model`) is what the page shows; `render_report` (`page`)
draws it — sections (`sections`; `measures`: bench's goodput search,
over-saturation, MLPerf blocks, an A/B run's plan and looks), inline SVG
charts (`svg`) and the run's time series (`timeline`) — with no script and
no request of its own.
"""

from infertriage.report.html.model import (
    AbPlan,
    Band,
    Chart,
    LevelView,
    Look,
    MaxRateView,
    RateStep,
    RunReport,
    Series,
)
from infertriage.report.html.page import CSP, Page, render_report
from infertriage.report.html.timeline import level_bands, run_charts, span_of

__all__ = [
    "CSP",
    "AbPlan",
    "Band",
    "Chart",
    "LevelView",
    "Look",
    "MaxRateView",
    "Page",
    "RateStep",
    "RunReport",
    "Series",
    "level_bands",
    "render_report",
    "run_charts",
    "span_of",
]
