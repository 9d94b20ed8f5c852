"""report, level 4: the goodput search (`bench --find-max-rate`) on screen and as JSON.

Takes a `MaxRateResult` (`loadgen.maxrate`); gives `max_rate_to_json` (bench's JSON
document's `max_rate`, and run.json's, which `plan --from-run` reads back), the steps'
table (rate, requests judged, attainment with its interval, holds or not, why) and the
headline: "max rate 7.4 req/s (attainment 97 % [93, 99]) — bracket [7.4, 7.8]".
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from infertriage.loadgen.maxrate import MaxRateResult, StepJudgement

__all__ = ["max_rate_headline", "max_rate_table", "max_rate_to_json"]


def _step_json(step: StepJudgement) -> dict[str, object]:
    return {
        "rate": step.rate,
        "num_judged": step.num_judged,
        "num_met": step.num_met,
        "attainment": step.attainment,
        "attainment_interval": list(step.interval),
        "holds": step.holds,
        "valid": step.valid,
        "why": step.why,
        "claims": [
            {
                "percentile": c.percentile,
                "limit_s": c.limit,
                "num_judged": c.num_judged,
                "num_over": c.num_over,
                "needed": c.needed,
                "met": c.met,
            }
            for c in step.claims
        ],
    }


def max_rate_to_json(result: MaxRateResult | None) -> dict[str, object] | None:
    """The search as JSON: the rate found, its bracket, the rule and every step."""
    if result is None:
        return None
    held = result.at_max
    return {
        "rule": result.rule.value,
        "target": result.target,
        "slos": {slo.metric: slo.limit_s for slo in result.slos},
        "probe_throughput": result.probe_rps,
        "max_rate": result.max_rate,
        "attainment": held.attainment if held else None,
        "attainment_interval": list(held.interval) if held else None,
        "bracket": list(result.bracket),
        "converged": result.converged,
        "tolerance": result.tolerance,
        "why": result.why,
        "interrupted": result.interrupted,
        "steps": [_step_json(step) for step in result.steps],
    }


def _verdict(step: StepJudgement) -> str:
    if step.holds is None:
        return "undecided"
    head = "holds" if step.holds else "fails"
    return head if step.valid else f"{head} (INVALID)"


def max_rate_table(result: MaxRateResult) -> Table:
    """One row per step: rate, requests judged, attainment [interval], verdict, why."""
    table = Table(title="goodput search", title_justify="left")
    for name in ("rate req/s", "judged", "attainment [95 % CI]"):
        table.add_column(name, justify="right")
    table.add_column("verdict")
    table.add_column("why")
    for step in result.steps:
        low, high = step.interval
        table.add_row(
            f"{step.rate:.3g}",
            str(step.num_judged),
            f"{step.attainment:.1%} [{low:.1%}, {high:.1%}]",
            _verdict(step),
            step.why,
        )
    return table


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def max_rate_headline(result: MaxRateResult) -> Text:
    """'max rate 7.4 req/s (attainment 97 % [93, 99]) — bracket [7.4, 7.8]', and the rule."""
    low, high = result.bracket
    bracket = f"bracket [{_rate(low)}, {_rate(high)}] req/s"
    held = result.at_max
    if result.interrupted:  # a lower bound at most: the search did not finish
        line = f"max rate: search interrupted ({result.why}) — {bracket}\n"
        return Text(line, style="bold red")
    if result.max_rate is None or held is None:
        line = f"max rate: none found ({result.why}) — {bracket}\n"
        return Text(line, style="bold red")
    lo, hi = held.interval
    attainment = f"attainment {held.attainment:.0%} [{lo:.0%}, {hi:.0%}]"
    text = Text(f"max rate {result.max_rate:.3g} req/s ({attainment}) — {bracket}\n", "bold")
    slos = ", ".join(f"{slo.metric} ≤ {slo.limit_s * 1e3:g} ms" for slo in result.slos)
    if result.rule.value == "attainment":
        rule = f"attainment ≥ {result.target:.0%} of requests meeting {slos} at 95 % confidence"
    else:
        rule = f"MLPerf server: p99 {slos}, LoadGen early stopping at 99 % confidence"
    text.append(f"  rule: {rule}; {result.why}\n")
    return text
