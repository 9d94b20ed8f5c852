"""loadgen, level 2: is a measured load level valid — the checks behind its VALID or INVALID.

Takes a level's `RequestRecord`s, the `Thresholds` its SLOs are judged by and
what the records do not say (`LevelFacts`: open or closed loop and its nominal
value, the prompt lengths asked, the client's own verdict); gives a
`schemas.Validity`. Pure: no clock, no I/O. The rules (`ValidityRules`):

- duration: the judged window (`latency.steady_requests`, the one `diagnose` and
  `validate` judge their SLOs over) lasts ≥ `min_judged_s` (10 s), and the level
  was not cut short by Ctrl-C;
- sample, one per percentile SLO of the interactive profile (TTFT p95 against
  `ttft_p95_s`; per-request TPOT p95 against `itl_p95_s`, as LoadGen holds TPOT):
  a claim that the percentile is within its limit needs the requests LoadGen's
  early-stopping rule asks for, with the count over the limit
  (`analyze.stats.earlystop`, 99 % confidence); a claim that it misses needs the
  share over the limit to exceed 1 − p at the same confidence (an exact binomial
  bound), else more requests;
- rate (open loop, finite rate): the sends of the judged window per second reach
  ≥ 90 % of the nominal rate, or fall short by no more than Poisson noise
  (2/√ the sends expected); not judged for sessions (multiturn, agentic), whose
  later requests wait on replies and think time;
- lengths: mean output tokens ≥ 90 % of those asked (when outputs were asked
  exactly: `ignore_eos`), and the server's prompt counts (`usage`) within 10 %
  or 32 tokens (a chat template's own) of the lengths asked;
- steady state: at least `MIN_GROWTH_POINTS` first tokens to judge it by (a level
  whose requests all failed shows no steady state); not stopped early as
  over-saturated (`loadgen.saturation`); an
  open loop kept up (`sweep.judge_stable`: completions and TTFT growth); a closed
  loop's TTFT from the intended start stayed bounded (`sweep.ttft_bounded`);
- client: the load client was not the bottleneck (`latency.judge_client`:
  schedule lag, client CPU, event-loop stalls). Stamps run late on a busy
  host, with the client mostly idle, pass with the reasons in the figure: bench
  warns of it, and it is the host, not the sample, that is at fault.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from infertriage.analyze.stats.binomial import exact_interval
from infertriage.analyze.stats.earlystop import LOADGEN_CONFIDENCE, early_stop
from infertriage.analyze.stats.latency import (
    ClientVerdict,
    steady_requests,
    steady_window,
    tpot_s,
)
from infertriage.loadgen.results import ClientDiagnostics, LevelResult
from infertriage.loadgen.saturation import Saturation
from infertriage.loadgen.sweep import (
    MIN_GROWTH_POINTS,
    judge_stable,
    ttft_bounded,
    ttft_growth,
)
from infertriage.schemas import (
    JudgedWindow,
    RequestRecord,
    SloProfile,
    Thresholds,
    TokenSource,
    Validity,
    ValidityCheck,
)

__all__ = [
    "LevelFacts",
    "ValidityRules",
    "client_verdict",
    "judge_validity",
    "level_validity",
    "nominal_of",
]


@dataclass(frozen=True, slots=True)
class ValidityRules:
    """The constraints a level is held to (a `--standard` preset may tighten them)."""

    min_judged_s: float = 10.0
    confidence: float = LOADGEN_CONFIDENCE
    rate_shortfall: float = 0.10  # achieved below nominal by more than this (and than noise)
    output_shortfall: float = 0.10  # mean output below the asked length by more than this
    prompt_tolerance: float = 0.10  # the server's prompt count off the asked by more than this
    prompt_slack_tokens: int = 32  # ... and by more than this many tokens


@dataclass(frozen=True, slots=True)
class LevelFacts:
    """What a level's records do not say about it."""

    mode: str | None = None  # "rate" | "concurrency"; None: unknown, the rate is not judged
    value: float | None = None  # the nominal rate (requests/s) or concurrency
    interrupted: bool = False
    exact_outputs: bool = True  # outputs asked exactly (ignore_eos): held to their length
    asked_prompt_tokens: Mapping[str, int] = field(default_factory=dict)  # by record id
    client: ClientVerdict | None = None  # None: the client's health was not measured
    saturation: Saturation | None = None  # the level was stopped early, over-saturated


def level_validity(
    level: LevelResult,
    records: Sequence[RequestRecord],
    thresholds: Thresholds,
    *,
    exact_outputs: bool = True,
    asked_prompt_tokens: Mapping[str, int] | None = None,
    rules: ValidityRules | None = None,
) -> Validity:
    """The validity of one bench level from its result and records."""
    facts = LevelFacts(
        mode=level.mode,
        value=level.value,
        interrupted=level.interrupted,
        exact_outputs=exact_outputs,
        asked_prompt_tokens=asked_prompt_tokens or {},
        client=client_verdict(level.client),
        saturation=level.saturation,
    )
    return judge_validity(records, thresholds, facts, rules)


def nominal_of(level: str) -> tuple[str | None, float | None]:
    """('rate', 4.0) of a level bench named "rate=4" (or a search's rerun, "rate=4 again");
    (None, None) of any other name."""
    mode, sep, value = level.partition("=")
    if not sep or mode not in {"rate", "concurrency"} or not value.split():
        return None, None
    try:
        return mode, float(value.split()[0])
    except ValueError:
        return None, None


def client_verdict(client: ClientDiagnostics) -> ClientVerdict:
    return ClientVerdict(client.client_bound, client.host_busy, client.reasons)


def judge_validity(
    records: Sequence[RequestRecord],
    thresholds: Thresholds,
    facts: LevelFacts,
    rules: ValidityRules | None = None,
) -> Validity:
    """Every check of the module's rules, on one level's records."""
    rules = rules or ValidityRules()
    judged, window = steady_requests(records)
    checks = [
        _duration(records, window, facts, rules),
        *_samples(judged, thresholds, rules),
        *_rate(judged, window, facts, rules),
        *_lengths(judged, facts, rules),
        _steady(records, facts),
        _client(facts.client),
    ]
    return Validity.of(checks)


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s"


def _duration(
    records: Sequence[RequestRecord], window: JudgedWindow, facts: LevelFacts, rules: ValidityRules
) -> ValidityCheck:
    judged_s = window.end_ts - window.start_ts
    times = [t for r in records for t in (r.sent_ts, r.end_ts) if t is not None]
    level_s = max(times, default=0.0) - min(times, default=0.0)
    figure = f"judged {_s(judged_s)} of a {_s(level_s)} level"
    rule = f"≥ {rules.min_judged_s:g} s judged, the level run to its end"
    if facts.interrupted:
        fix = "run the level to its end (it was cut short by Ctrl-C)"
        return ValidityCheck(
            name="duration", passed=False, figure=figure + ", cut short", rule=rule, fix=fix
        )
    if judged_s >= rules.min_judged_s:
        return ValidityCheck(name="duration", passed=True, figure=figure, rule=rule)
    more = rules.min_judged_s - judged_s
    fix = f"run the level ≥ {more:.1f} s longer (--duration, or more --num-requests)"
    return ValidityCheck(name="duration", passed=False, figure=figure, rule=rule, fix=fix)


def _claims(thresholds: Thresholds) -> list[tuple[str, float, float]]:
    """(metric, percentile, limit) of each percentile SLO the profile claims."""
    if thresholds.profile is not SloProfile.INTERACTIVE:
        return []
    return [("TTFT", 0.95, thresholds.ttft_p95_s), ("TPOT", 0.95, thresholds.itl_p95_s)]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f} ms" if seconds < 1.0 else f"{seconds:.2f} s"


def _samples(
    judged: Sequence[RequestRecord], thresholds: Thresholds, rules: ValidityRules
) -> list[ValidityCheck]:
    out = []
    for metric, percentile, limit in _claims(thresholds):
        values = [
            v
            for r in judged
            if r.ok and (v := (r.ttft_s if metric == "TTFT" else tpot_s(r))) is not None
        ]
        name = f"sample: {metric} p{percentile * 100:g}"
        out.append(_sample(name, (metric, percentile, limit), values, rules))
    return out


def _sample(
    name: str, slo: tuple[str, float, float], values: Sequence[float], rules: ValidityRules
) -> ValidityCheck:
    metric, percentile, limit = slo
    stop = early_stop(values, limit, percentile, confidence=rules.confidence)
    n, over = stop.num_judged, stop.num_over
    claim = f"p{percentile * 100:g} {metric} claim"
    rule = (
        f"LoadGen's early stopping at {rules.confidence:.0%} confidence (a miss: over "
        f"{1 - percentile:.0%} of requests over {_ms(limit)} at that confidence)"
    )
    over_text = "none" if over == 0 else str(over)
    if n and over > (1.0 - percentile) * n:  # the sample says the SLO is missed: is it sure?
        low, _ = exact_interval(over, n, level=1.0 - 2.0 * (1.0 - rules.confidence))
        figure = f"{over} of {n} judged over {_ms(limit)} (≥ {low:.1%} at {rules.confidence:.0%})"
        if low > 1.0 - percentile:
            return ValidityCheck(name=name, passed=True, figure=f"a miss: {figure}", rule=rule)
        fix = f"run more requests: a miss of the {claim} is not established on {n}"
        return ValidityCheck(name=name, passed=False, figure=figure, rule=rule, fix=fix)
    figure = (
        f"need ≥ {stop.needed} requests for a {claim} ({over_text} over {_ms(limit)}); "
        f"{n} were judged"
    )
    if stop.met:
        return ValidityCheck(name=name, passed=True, figure=figure, rule=rule)
    fix = f"judge ≥ {stop.more} more requests (a longer level, or a higher rate)"
    return ValidityCheck(name=name, passed=False, figure=figure, rule=rule, fix=fix)


def _rate(
    judged: Sequence[RequestRecord],
    window: JudgedWindow,
    facts: LevelFacts,
    rules: ValidityRules,
) -> list[ValidityCheck]:
    nominal = facts.value
    if facts.mode != "rate" or nominal is None or not math.isfinite(nominal) or nominal <= 0:
        return []  # a closed loop sets no rate; a burst (rate inf) none to reach
    rule = (
        f"sends ≥ {1 - rules.rate_shortfall:.0%} of the nominal rate, "
        "or short by no more than Poisson noise (2/√expected)"
    )
    if any("session" in r.labels for r in judged):  # multiturn, agentic
        figure = (
            f"not judged: a session's later requests are sent on its replies, not at the "
            f"nominal {nominal:g}/s (the client check judges the schedule's lag)"
        )
        return [ValidityCheck(name="rate", passed=True, figure=figure, rule=rule)]
    sends = sorted(r.sent_ts for r in judged)
    if window.basis == "steady":
        span, count = window.end_ts - window.start_ts, len(sends)
    else:  # the whole level: its sends' span, without the drain
        span, count = (sends[-1] - sends[0], len(sends) - 1) if len(sends) > 1 else (0.0, 0)
    if span <= 0 or count <= 0:
        fix = "run the level longer: too few sends to measure a rate"
        figure = f"{len(sends)} send(s): no rate measured (nominal {nominal:g}/s)"
        return [ValidityCheck(name="rate", passed=False, figure=figure, rule=rule, fix=fix)]
    achieved = count / span
    allowed = max(rules.rate_shortfall, 2.0 / math.sqrt(max(nominal * span, 1.0)))
    figure = f"achieved {achieved:.3g}/s of a nominal {nominal:g}/s ({achieved / nominal:.0%})"
    if achieved >= (1.0 - allowed) * nominal:
        return [ValidityCheck(name="rate", passed=True, figure=figure, rule=rule)]
    fix = "more --workers if the client lagged, or a rate the client and server keep up with"
    return [ValidityCheck(name="rate", passed=False, figure=figure, rule=rule, fix=fix)]


def _lengths(
    judged: Sequence[RequestRecord], facts: LevelFacts, rules: ValidityRules
) -> list[ValidityCheck]:
    ok = [r for r in judged if r.ok]
    out = []
    asked_out = [(r.output_tokens or 0, r.max_tokens) for r in ok if r.max_tokens]
    if asked_out and facts.exact_outputs:
        ratio = sum(got / want for got, want in asked_out) / len(asked_out)
        figure = f"outputs {ratio:.0%} of the asked length (mean of {len(asked_out)})"
        rule = f"mean output ≥ {1 - rules.output_shortfall:.0%} of the tokens asked"
        fix = (
            "a server that honours ignore_eos / min_tokens, or --no-ignore-eos to measure "
            "outputs that end at the model's EOS"
        )
        passed = ratio >= 1.0 - rules.output_shortfall
        out.append(_check("output lengths", passed, figure, rule, fix))
    pairs = [
        (r.prompt_tokens, facts.asked_prompt_tokens[r.id])
        for r in ok
        if r.id in facts.asked_prompt_tokens
        and r.prompt_tokens is not None
        and r.prompt_tokens_source is TokenSource.USAGE
    ]
    if pairs:
        got = sum(p[0] for p in pairs) / len(pairs)
        want = sum(p[1] for p in pairs) / len(pairs)
        figure = f"prompts {got:.0f} tokens by the server's count, {want:.0f} asked (mean)"
        rule = (
            f"within {rules.prompt_tolerance:.0%} or {rules.prompt_slack_tokens} tokens "
            "(a chat template's own) of the asked length"
        )
        off = abs(got - want)
        fix = (
            "--tokenizer (the served model's tokenizer.json), so prompts are counted as "
            "the server counts them"
        )
        passed = off <= max(rules.prompt_tolerance * want, rules.prompt_slack_tokens)
        out.append(_check("prompt lengths", passed, figure, rule, fix))
    return out


def _check(name: str, passed: bool, figure: str, rule: str, fix: str) -> ValidityCheck:
    """A check with its fix only where it failed."""
    return ValidityCheck(
        name=name, passed=passed, figure=figure, rule=rule, fix="" if passed else fix
    )


def _steady(records: Sequence[RequestRecord], facts: LevelFacts) -> ValidityCheck:
    if facts.saturation is not None:  # stopped while its queue grew: no steady state to judge
        return ValidityCheck(
            name="steady state",
            passed=False,
            figure=facts.saturation.describe(),
            rule="not stopped early as over-saturated (`loadgen.saturation`)",
            fix="a lower rate: the server could not keep up, so no figure of this level holds",
        )
    firsts = sum(1 for r in records if r.first_token_ts is not None)
    if firsts < MIN_GROWTH_POINTS:  # no growth to measure: not a steady state shown
        return ValidityCheck(
            name="steady state",
            passed=False,
            figure=f"{firsts} request(s) gave a first token: too few to measure TTFT growth",
            rule=f"TTFT from the intended start bounded, on ≥ {MIN_GROWTH_POINTS} first tokens",
            fix="requests that succeed: see the level's errors",
        )
    slope, ratio = ttft_growth(records)
    slope = round(slope, 3) + 0.0  # no "-0.000"
    growth = (
        f"TTFT from the intended start grew {slope:.3f} s/s, last quarter {ratio:.2f}× the first"
    )
    open_loop = facts.mode == "rate" and facts.value is not None and math.isfinite(facts.value)
    if open_loop:
        rule = "completions ≥ 90 % of sends in the window, TTFT growth bounded (sweep's rule)"
        stable = judge_stable(records, steady_window(records))
    else:
        rule = "TTFT from the intended start bounded: slope < 0.05 s/s or last/first quarter < 1.5×"
        stable = ttft_bounded(records)
    if stable:
        return ValidityCheck(name="steady state", passed=True, figure=growth, rule=rule)
    fix = "a lower load: the server did not keep up, so the figures depend on the level's length"
    return ValidityCheck(name="steady state", passed=False, figure=growth, rule=rule, fix=fix)


def _client(client: ClientVerdict | None) -> ValidityCheck:
    rule = (
        "the load client not the bottleneck (`judge_client`: schedule lag, client CPU, "
        "event-loop stalls); a busy host's late stamps are a warning"
    )
    if client is None:
        return ValidityCheck(name="client", passed=True, figure="not measured", rule=rule)
    if client.client_bound:
        figure = "client-bound: " + "; ".join(client.reasons)
        fix = "more --workers or a lower load"
        return ValidityCheck(name="client", passed=False, figure=figure, rule=rule, fix=fix)
    if client.host_busy:  # late, not by the client's own work: bench warns of it
        figure = "kept up; the host ran its stamps late: " + "; ".join(client.reasons)
        return ValidityCheck(name="client", passed=True, figure=figure, rule=rule)
    return ValidityCheck(name="client", passed=True, figure="kept its schedule", rule=rule)
