"""report.html, level 4: what bench's searches and standards add to the page.

Takes a `RunReport`; gives HTML fragments: the goodput search of `bench
--find-max-rate` (the headline — max rate, attainment with its interval, the bracket,
the rule — and a row per rate tried: requests judged, attainment [interval], holds or
fails, why), each over-saturated level's verdict and evidence (beside the levels table),
MLPerf LoadGen's summary block per level of a `--standard mlperf` run with its
VALID/INVALID, and an A/B run's sample plan and `--until-decided` looks. Each returns ""
when the run has nothing for it; every string that is not ours is escaped here (`_e`).
"""

from __future__ import annotations

from infertriage.report.html.markup import badge, section, table
from infertriage.report.html.model import AbPlan, LevelView, MaxRateView, RateStep, RunReport
from infertriage.schemas.text import escape_html as _e

__all__ = [
    "ab_plan_html",
    "max_rate_section",
    "mlperf_section",
    "mlperf_verdict",
    "saturation_notes",
]


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _share(value: float, interval: tuple[float, float], digits: int = 1) -> str:
    low, high = interval
    return f"{value:.{digits}%} [{low:.{digits}%}, {high:.{digits}%}]"


def _step_verdict(step: RateStep) -> str:
    if step.holds is None:
        word = badge("undecided", "inconclusive")
    else:
        word = badge("holds", "pass") if step.holds else badge("fails", "fail")
    return word if step.valid else f"{word} {badge('INVALID', 'fail')}"


def _rule(view: MaxRateView) -> str:
    slos = ", ".join(f"{metric} ≤ {limit * 1e3:g} ms" for metric, limit in view.slos)
    if view.rule == "attainment":
        return (
            f"attainment ≥ {view.target:.0%} of requests meeting {slos} at 95 % confidence "
            "(the exact interval's lower end at or above it)"
        )
    return f"MLPerf server: p99 {slos}, LoadGen early stopping at 99 % confidence"


def _headline(view: MaxRateView) -> str:
    low, high = view.bracket
    bracket = f"bracket [{_rate(low)}, {_rate(high)}] req/s"
    if view.max_rate is None:
        return f'<p class="verdict bad">No rate held: {_e(view.why)} — {_e(bracket)}</p>'
    held = ""
    if view.attainment is not None and view.interval is not None:
        held = f" (attainment {_share(view.attainment, view.interval, 0)})"
    tone = "good" if view.converged else "warn"
    return (
        f'<p class="verdict {tone}">Max rate {_rate(view.max_rate)} req/s{_e(held)} — '
        f"{_e(bracket)}</p>"
    )


def max_rate_section(report: RunReport) -> str:
    view = report.max_rate
    if view is None:
        return ""
    probe = (
        f"; the closed-loop probe's throughput {_rate(view.probe_rps)} req/s bounds the rates"
        if view.probe_rps
        else ""
    )
    rule = f'<p class="dim">Rule: {_e(_rule(view))}; {_e(view.why)}{_e(probe)}.</p>'
    rows = [
        [
            f"{step.rate:.3g}",
            f"{step.num_judged:,}",
            _e(_share(step.attainment, step.interval)),
            _step_verdict(step),
            _e(step.why),
        ]
        for step in view.steps
    ]
    head = ["rate req/s", "requests judged", "attainment [95 % CI]", "verdict", "why"]
    steps = _table_or_none(head, rows)
    return section("maxrate", "Goodput search", _headline(view) + rule + steps)


def _table_or_none(head: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return '<p class="dim">No rate was tried.</p>'
    return "<h3>Steps, in the order run</h3>" + table(head, rows, "num ab")


def saturation_notes(levels: tuple[LevelView, ...]) -> str:
    """Each over-saturated level: the verdict and its evidence line."""
    items = "".join(
        f"<li>{_e(level.name)}: {badge('over-saturated', 'fail')}"
        f" — stopped early; {_e(level.saturation)}</li>"
        for level in levels
        if level.saturation
    )
    return f'<ul class="saturation">{items}</ul>' if items else ""


def mlperf_verdict(text: str) -> str | None:
    """VALID or INVALID, as LoadGen's block says it ("Result is : …"); None if it doesn't."""
    for line in text.splitlines():
        if line.startswith("Result is :"):
            word = line.partition(":")[2].strip()
            return word if word in ("VALID", "INVALID") else None
    return None


def mlperf_section(report: RunReport) -> str:
    parts = []
    for level in report.levels:
        if level.mlperf is None:
            continue
        verdict = mlperf_verdict(level.mlperf)
        tone = "pass" if verdict == "VALID" else "fail"
        mark = "" if verdict is None else " " + badge(verdict, tone)
        parts.append(f"<h3>{_e(level.name)}{mark}</h3><pre>{_e(level.mlperf)}</pre>")
    if not parts:
        return ""
    note = (
        '<p class="dim">MLPerf LoadGen\'s Server scenario (<code>--standard mlperf</code>): '
        "each level's summary block, as <code>mlperf_log_summary.txt</code> holds it.</p>"
    )
    return section("mlperf", "MLPerf LoadGen summary", note + "".join(parts))


def ab_plan_html(plan: AbPlan | None) -> str:
    """The sample plan line (compare's own, among its notes, else built from the plan), what
    each metric needs, the looks table, and compare's notes."""
    if plan is None:
        return ""
    parts = []
    if plan.plan and not any(note.startswith("planned:") for note in plan.notes):
        parts.append(f'<p class="plan">{_e(plan.plan)}</p>')
    if plan.needs:
        rows = [[_e(metric), f"{needed:,}"] for metric, needed in plan.needs]
        parts.append(table(["metric (p50)", "requests per arm needed"], rows, "num"))
    if plan.looks:
        rows = [
            [
                str(look.index),
                str(look.block),
                f"{look.per_arm:,}",
                f"{look.alpha:.2g}",
                _e(", ".join(look.undecided) or "none"),
            ]
            for look in plan.looks
        ]
        head = ["look", "block", "requests per arm", "alpha", "undecided"]
        parts.append("<h3>Looks (<code>--until-decided</code>)</h3>" + table(head, rows, "num ab"))
    parts += [f'<p class="dim">{_e(note)}</p>' for note in plan.notes]
    return "".join(parts)
