"""report.html, level 4: charts as inline SVG strings, drawn in Python (no script, no network).

Takes `Chart`s (time series on the run's clock, with the `Band`s of its
load levels shaded behind) and latency samples; gives `<svg>` markup the
page embeds as it is: a time chart per signal group and an empirical CDF
per latency (log-scale x, one line per level or arm). Names and titles
pass `schemas.text.escape_html`; numbers are formatted here (ms, %, GiB).
Long series are thinned to at most `_MAX_POINTS` points, keeping each
stretch's peak, so a spike in KV use or the queue still shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from infertriage.report.html.model import Band, Chart, FloatArray, Series
from infertriage.schemas import format_bytes
from infertriage.schemas.text import escape_html

__all__ = ["PALETTE", "cdf_chart", "format_axis", "legend", "time_chart"]

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#17becf",
    "#7f7f7f",
)
_W, _H = 760, 230
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 12, 10, 30
_MAX_POINTS = 600
_CDF_STEPS = 200


def format_axis(value: float, unit: str) -> str:
    """A tick or value label: seconds as ms, fractions as %, bytes in binary units."""
    if unit == "s":
        return f"{value * 1e3:,.3g} ms" if abs(value) < 10 else f"{value:,.3g} s"
    if unit == "fraction":
        return f"{value * 100:.0f}%"
    if unit == "bytes":
        return format_bytes(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _thin(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """At most `_MAX_POINTS` points: each stretch's largest value, at its time."""
    if len(points) <= _MAX_POINTS:
        return list(points)
    size = math.ceil(len(points) / _MAX_POINTS)
    return [max(points[i : i + size], key=lambda p: p[1]) for i in range(0, len(points), size)]


class _Frame:
    """The plot area and its scales: x over [x0, x1], y over [y0, y1]."""

    def __init__(self, x: tuple[float, float], y: tuple[float, float], *, log_x: bool = False):
        self.log_x = log_x
        self.x0, self.x1 = (math.log10(x[0]), math.log10(x[1])) if log_x else x
        self.y0, self.y1 = y
        if self.x1 <= self.x0:
            self.x1 = self.x0 + 1.0
        if self.y1 <= self.y0:
            self.y1 = self.y0 + 1.0

    def px(self, x: float) -> float:
        value = math.log10(x) if self.log_x else x
        return _LEFT + (value - self.x0) / (self.x1 - self.x0) * (_W - _LEFT - _RIGHT)

    def py(self, y: float) -> float:
        return _H - _BOTTOM - (y - self.y0) / (self.y1 - self.y0) * (_H - _TOP - _BOTTOM)

    def polyline(self, points: Sequence[tuple[float, float]], color: str, name: str) -> str:
        coords = " ".join(f"{self.px(x):.1f},{self.py(y):.1f}" for x, y in points)
        return (
            f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{coords}">'
            f"<title>{escape_html(name)}</title></polyline>"
        )


def _axes(frame: _Frame, x_ticks: Sequence[tuple[float, str]], y_unit: str) -> list[str]:
    parts = [
        f'<line class="axis" x1="{_LEFT}" y1="{_H - _BOTTOM}" x2="{_W - _RIGHT}" '
        f'y2="{_H - _BOTTOM}"/>',
        f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_H - _BOTTOM}"/>',
    ]
    for value in _ticks(frame.y0, frame.y1, 4):
        y = frame.py(value)
        parts.append(
            f'<line class="grid" x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}"/>'
        )
        parts.append(
            f'<text class="tick" x="{_LEFT - 4}" y="{y + 3:.1f}" text-anchor="end">'
            f"{escape_html(format_axis(value, y_unit))}</text>"
        )
    for value, label in x_ticks:
        x = frame.px(value)
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{_H - _BOTTOM + 14}" text-anchor="middle">'
            f"{escape_html(label)}</text>"
        )
    return parts


def _svg(body: Sequence[str], label: str) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
        f'aria-label="{escape_html(label)}" xmlns="http://www.w3.org/2000/svg">'
        + "".join(body)
        + "</svg>"
    )


def _bands(frame: _Frame, bands: Sequence[Band]) -> list[str]:
    parts: list[str] = []
    for index, band in enumerate(bands):
        x0, x1 = frame.px(band.start_ts), frame.px(band.end_ts)
        shade = "band-a" if index % 2 == 0 else "band-b"
        parts.append(
            f'<rect class="{shade}" x="{x0:.1f}" y="{_TOP}" width="{max(x1 - x0, 0.5):.1f}" '
            f'height="{_H - _TOP - _BOTTOM}"><title>{escape_html(band.name)} '
            f"({band.start_ts:.1f}–{band.end_ts:.1f} s)</title></rect>"
        )
    return parts


def time_chart(chart: Chart, bands: Sequence[Band], span: tuple[float, float]) -> str:
    """`chart`'s lines over the run's clock `span`, the level bands shaded behind them."""
    thinned = [(s, _thin(s.points)) for s in chart.series]
    values = [v for _, points in thinned for _, v in points]
    top = max(values, default=1.0)
    if chart.unit == "fraction":
        top = max(top, 1.0)
    frame = _Frame(span, (0.0, top * 1.05 if top > 0 else 1.0))
    x_ticks = [(t, f"{t:.0f} s") for t in _ticks(span[0], span[1], 8)]
    body = _bands(frame, bands) + _axes(frame, x_ticks, chart.unit)
    for index, (series, points) in enumerate(thinned):
        body.append(frame.polyline(points, PALETTE[index % len(PALETTE)], series.name))
    return _svg(body, chart.title)


def _cdf_points(values: FloatArray, floor: float) -> list[tuple[float, float]]:
    probabilities = np.linspace(0.0, 1.0, _CDF_STEPS + 1)
    quantiles = np.quantile(np.maximum(values, floor), probabilities)
    return [(float(x), float(p)) for x, p in zip(quantiles, probabilities, strict=True)]


def cdf_chart(title: str, curves: Sequence[tuple[str, FloatArray]], unit: str = "s") -> str:
    """The empirical CDF of each named sample set, log-scale x (values at or below 0 at its
    smallest positive value); an empty string when no set has a value."""
    kept = [(name, values) for name, values in curves if values.size]
    if not kept:
        return ""
    every = np.concatenate([values for _, values in kept])
    positive = every[every > 0]
    floor = float(positive.min()) if positive.size else 1e-6
    top = max(float(every.max()), floor * 10)
    frame = _Frame((floor, top), (0.0, 1.0), log_x=True)
    decades = range(math.floor(math.log10(floor)), math.ceil(math.log10(top)) + 1)
    steps = (1,) if len(decades) > 3 else (1, 2, 5)  # a narrow range gets 2× and 5× ticks too
    marks = [m * 10.0**d for d in decades for m in steps if floor <= m * 10.0**d <= top]
    x_ticks = [(v, format_axis(v, unit)) for v in marks] or [
        (floor, format_axis(floor, unit)),
        (top, format_axis(top, unit)),
    ]
    body = _axes(frame, x_ticks, "fraction")
    for index, (name, values) in enumerate(kept):
        color = PALETTE[index % len(PALETTE)]
        body.append(frame.polyline(_cdf_points(values, floor), color, name))
    return _svg(body, title)


def legend(series: Sequence[Series] | Sequence[str]) -> str:
    """An HTML legend: a coloured swatch and the (escaped) name of each line, in order."""
    names = [s if isinstance(s, str) else s.name for s in series]
    items = "".join(
        f'<span class="key"><span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}">'
        f"</span>{escape_html(name)}</span>"
        for i, name in enumerate(names)
    )
    return f'<div class="legend">{items}</div>'
