"""report, level 4: a comparison (baseline vs run, or A vs B) on screen, as JSON and Markdown.

Takes a `CompareResult` — per paired load level the `analyze.compare`
comparison, plus the environment and server-configuration changes and
notes; gives a rich table per level, `compare_to_json` (schema
`infertriage.compare/v1`, seconds and fractions) and `compare_markdown`
(a CI comment: the verdict first, then the regressions and the inconclusive
metrics, the table, the configuration diff and the traffic-shape warnings).
A level's sample plan (`analyze.compare.power`) is said under its table
("planned: ~N requests per arm …; the sample is big enough / too small"); an
A/B run says it, and its looks under --until-decided, in its notes.

The verdict line, last on screen and first in Markdown, is one of
"REGRESSION: …" (any metric regressed; the inconclusive ones are named too),
"INCONCLUSIVE: …" (none regressed but at least one could not be judged: each
is named with the samples that would settle it) or "No regression." (every
metric judged). It never says "No regression." while a metric is undecided.

Names, levels, configuration values and notes come from run directories and
servers: each goes through `schemas.text` (terminal or Markdown) as data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from infertriage.analyze.compare.comparison import Comparison, ConfigChange, MetricComparison
from infertriage.analyze.compare.power import SamplePlan
from infertriage.analyze.compare.sequential import Look
from infertriage.schemas.text import escape_markdown, terminal_text

__all__ = [
    "COMPARE_SCHEMA",
    "CompareResult",
    "LevelComparison",
    "change_text",
    "compare_markdown",
    "compare_to_json",
    "metric_text",
    "render_compare",
    "verdict_line",
]

COMPARE_SCHEMA = "infertriage.compare/v1"
_STYLE = {
    "regression": "bold red",
    "improvement": "green",
    "unchanged": "",
    "inconclusive": "yellow",
}
_MARK = {"regression": "❌", "improvement": "✅", "unchanged": "·", "inconclusive": "❔"}
_SIGN = {"regression": "✗", "improvement": "✓", "unchanged": "·", "inconclusive": "?"}
_SHORT = {"output_throughput": "throughput"}
_VERDICT_STYLE = {
    "regression": "bold red",
    "inconclusive": "bold yellow",
    "no regression": "bold green",
}


@dataclass(frozen=True, slots=True)
class LevelComparison:
    base_level: str
    run_level: str
    comparison: Comparison
    plan: SamplePlan | None = None  # the requests per arm that would likely decide it

    def sample_line(self) -> str | None:
        """The plan and whether the level's samples reached it (None without a plan)."""
        if self.plan is None:
            return None
        sizes = [(m.base_n, m.run_n) for m in self.comparison.metrics if m.metric == "e2e"]
        base_n, run_n = sizes[0] if sizes else (0, 0)
        return f"{self.plan.describe()}; {self.plan.enough(base_n, run_n)}"


@dataclass(frozen=True, slots=True)
class CompareResult:
    base: str
    run: str
    levels: tuple[LevelComparison, ...]
    environment: tuple[ConfigChange, ...]
    server_config: tuple[ConfigChange, ...]
    notes: tuple[str, ...]
    run_dir: Path | None = None  # the A/B run's own directory
    interrupted: bool = False  # Ctrl-C cut the A/B run: it compares the blocks that ran
    looks: tuple[Look, ...] = ()  # --until-decided: each look after a block

    @property
    def regressions(self) -> list[tuple[str, MetricComparison]]:
        return [(lv.run_level, m) for lv in self.levels for m in lv.comparison.regressions]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    @property
    def undecided(self) -> list[tuple[str, MetricComparison]]:
        """The inconclusive metrics, with their (run) level."""
        return [(lv.run_level, m) for lv in self.levels for m in lv.comparison.inconclusive]

    @property
    def inconclusive(self) -> bool:
        """No metric regressed, and at least one could not be judged."""
        return not self.regressed and bool(self.undecided)

    @property
    def verdict(self) -> str:
        if self.regressed:
            return "regression"
        return "inconclusive" if self.inconclusive else "no regression"


def metric_text(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.2f} s" if value >= 1.0 else f"{value * 1e3:.1f} ms"
    if unit == "fraction":
        return f"{value:.2%}"
    if unit == "tokens/s":
        return f"{value:,.0f} t/s"
    return f"{value:,.1f} {unit}"


def _side(m: MetricComparison, side: str, stat: str) -> str:
    stats = getattr(m, side)
    return "—" if stats is None else metric_text(getattr(stats, stat), m.unit)


def change_text(change: float | None) -> str:
    if change is None:
        return "—"
    return f"{change + 1:.0f}×" if change >= 9 else f"{change:+.0%}"


def _pair(m: MetricComparison, stat: str) -> str:
    if m.base is None or m.run is None:
        return "—"
    base, run = getattr(m.base, stat), getattr(m.run, stat)
    return f"{metric_text(base, m.unit)} → {metric_text(run, m.unit)}"


def _settle(m: MetricComparison) -> str:
    if m.settle_n is not None:
        return f"needs about {m.settle_n[0]} vs {m.settle_n[1]} {m.sample_unit}"
    if m.base_n == 0 or m.run_n == 0:
        return f"no {m.sample_unit} on one side"
    return f"needs far more {m.sample_unit} (see its reason)"


def verdict_line(result: CompareResult) -> str:
    undecided = "; ".join(f"{m.metric} ({level}) {_settle(m)}" for level, m in result.undecided)
    if regressions := result.regressions:
        names = ", ".join(f"{m.metric} ({level})" for level, m in regressions)
        tail = f"; inconclusive: {undecided}" if undecided else ""
        return f"REGRESSION: {len(regressions)} metric(s) worse — {names}{tail}."
    if undecided:
        count = len(result.undecided)
        return f"INCONCLUSIVE: {count} metric(s) could not be judged — {undecided}."
    improved = sum(len(lv.comparison.improvements) for lv in result.levels)
    tail = f"; {improved} improved" if improved else ""
    return f"No regression{tail}."


def _level_table(level: LevelComparison) -> Table:
    title = (
        level.run_level
        if level.base_level == level.run_level
        else (f"{level.base_level} → {level.run_level}")
    )
    caption = "✗ regression  ✓ improvement  ? inconclusive  · unchanged"
    table = Table(
        title=terminal_text(title), title_justify="left", caption=caption, box=box.SIMPLE_HEAD
    )
    for column in ("metric", "base p50", "run p50", "Δ", "base p95", "run p95", "Δ"):
        table.add_column(column, no_wrap=True, justify="left" if column == "metric" else "right")
    for m in level.comparison.metrics:
        name = terminal_text(
            f"{_SIGN[m.verdict]} {_SHORT.get(m.metric, m.metric)}", _STYLE[m.verdict]
        )
        table.add_row(
            name,
            _side(m, "base", "p50"),
            _side(m, "run", "p50"),
            change_text(m.change_p50),
            _side(m, "base", "p95"),
            _side(m, "run", "p95"),
            change_text(m.change_p95),
        )
    return table


def _changes(title: str, changes: Sequence[ConfigChange]) -> list[str]:
    return [f"{title}: {c.key}: {c.base!r} → {c.run!r}" for c in changes]


def render_compare(result: CompareResult, console: Console) -> None:
    head = terminal_text(f" base {result.base}  vs  run {result.run}")
    console.print(Text.assemble(("Compare", "bold"), head))
    for level in result.levels:
        console.print(_level_table(level))
        if result.run_dir is None and (line := level.sample_line()) is not None:
            console.print(terminal_text(line, "dim"))
        for m in level.comparison.metrics:
            if m.verdict in ("regression", "improvement", "inconclusive"):
                console.print(terminal_text(f"  {m.metric}: {m.reason}", _STYLE[m.verdict]))
        for warning in level.comparison.shape:
            console.print(terminal_text(f"warning: {warning}", "yellow"))
    for line in _changes("environment", result.environment) + _changes(
        "server config", result.server_config
    ):
        console.print(terminal_text(line, "cyan"))
    for note in result.notes:
        console.print(terminal_text(f"note: {note}", "dim"))
    console.print(terminal_text(verdict_line(result), _VERDICT_STYLE[result.verdict]))


def _metric_json(m: MetricComparison) -> dict[str, Any]:
    return {
        "metric": m.metric,
        "unit": m.unit,
        "lower_is_better": m.lower_is_better,
        "base_n": m.base_n,
        "run_n": m.run_n,
        "base": None
        if m.base is None
        else {"p50": m.base.p50, "p95": m.base.p95, "mean": m.base.mean},
        "run": None if m.run is None else {"p50": m.run.p50, "p95": m.run.p95, "mean": m.run.mean},
        "change_p50": m.change_p50,
        "change_p95": m.change_p95,
        "p50_diff_ci": m.p50_diff_ci,
        "p95_diff_ci": m.p95_diff_ci,
        "p_value": m.p_value,
        "tail_p_value": m.tail_p_value,
        "verdict": m.verdict,
        "reason": m.reason,
        "settle_n": m.settle_n,
        "sample_unit": m.sample_unit,
    }


def _plan_json(plan: SamplePlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {
        "requests_per_arm": plan.requests_per_arm,
        "threshold": plan.threshold,
        "power": plan.power,
        "alpha_per_statistic": plan.alpha,
        "pilot_per_arm": plan.pilot_per_arm,
        "error_rate_requests": plan.error_needed,
        "metrics": [
            {
                "metric": n.metric,
                "sigma_log": n.sigma,
                "detect": n.detect,
                "equivalent": n.equivalent,
                "needed": n.needed,
            }
            for n in plan.needs
        ],
    }


def _changes_json(changes: Sequence[ConfigChange]) -> list[dict[str, Any]]:
    return [{"key": c.key, "base": c.base, "run": c.run} for c in changes]


def compare_to_json(result: CompareResult) -> dict[str, Any]:
    return {
        "schema": COMPARE_SCHEMA,
        "base": result.base,
        "run": result.run,
        "verdict": result.verdict,
        "regressed": result.regressed,
        "inconclusive": result.inconclusive,
        "run_dir": str(result.run_dir) if result.run_dir else None,
        "levels": [
            {
                "base_level": lv.base_level,
                "run_level": lv.run_level,
                "metrics": [_metric_json(m) for m in lv.comparison.metrics],
                "traffic_shape": list(lv.comparison.shape),
                "plan": _plan_json(lv.plan),
            }
            for lv in result.levels
        ],
        "looks": [
            {
                "look": look.index,
                "block": look.block,
                "per_arm": look.per_arm,
                "alpha": look.alpha,
                "undecided": list(look.undecided),
            }
            for look in result.looks
        ],
        "environment": _changes_json(result.environment),
        "server_config": _changes_json(result.server_config),
        "notes": list(result.notes),
    }


_cell = escape_markdown


def compare_markdown(result: CompareResult) -> str:
    lines = [f"### infertriage compare: {_cell(result.base)} → {_cell(result.run)}", ""]
    lines += [f"**{_cell(verdict_line(result))}**", ""]
    for level, m in result.regressions:
        lines.append(f"- ❌ **{_cell(m.metric)}** ({_cell(level)}): {_cell(m.reason)}")
    for level, m in result.undecided:
        lines.append(f"- ❔ **{_cell(m.metric)}** ({_cell(level)}): {_cell(m.reason)}")
    for lv in result.levels:
        lines += ["", f"#### {_cell(lv.run_level)}", ""]
        if result.run_dir is None and (line := lv.sample_line()) is not None:
            lines += [f"_{_cell(line)}_", ""]
        lines += ["| | metric | p50 | Δp50 | p95 | Δp95 | p |", "|---|---|---|---|---|---|---|"]
        for m in lv.comparison.metrics:
            lines.append(
                f"| {_MARK[m.verdict]} | {_cell(m.metric)} | {_pair(m, 'p50')} "
                f"| {change_text(m.change_p50)} | {_pair(m, 'p95')} | {change_text(m.change_p95)} "
                f"| {m.p_value:.2g} |"
            )
        lines += [f"\n> ⚠️ {_cell(w)}" for w in lv.comparison.shape]
    changed = _changes("environment", result.environment) + _changes(
        "server config", result.server_config
    )
    if changed:
        lines += ["", "#### What changed", ""] + [f"- {_cell(c)}" for c in changed]
    lines += [""] + [f"> note: {_cell(n)}" for n in result.notes]
    return "\n".join(lines).rstrip() + "\n"
