"""diagnose, level 3: speculative-decoding rules — acceptance rate, acceptance by position."""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_below
from infertriage.diagnose.symptom import current, itl_missed
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.SPECULATIVE


@rule("speculative.low_acceptance", _L, ("spec.acceptance_rate",))
def low_acceptance(ev: Evidence, t: Thresholds) -> Finding | None:
    rate = ev.get("spec.acceptance_rate") or 0.0
    if rate >= t.low_acceptance:
        return None
    accepted = ev.get("spec.mean_accepted_tokens")
    length = f", {accepted:.2f} tokens accepted per step" if accepted is not None else ""
    return make_finding(
        "speculative.low_acceptance",
        _L,
        bottleneck=rate <= t.not_worth_it or itl_missed(ev, t),
        severity=severity_below(rate, t.low_acceptance, 0.0),
        explains=1 - rate,
        title=f"draft acceptance {rate:.0%}{length}",
        evidence=ev,
        used=(("spec.acceptance_rate", t.low_acceptance), ("spec.mean_accepted_tokens", None)),
        explanation=(
            "Every step verifies all draft tokens; when few are accepted the verification and "
            "the draft model cost more time than the accepted tokens save."
        ),
        next_steps=(
            "lower `num_speculative_tokens`" + current(ev, "spec.num_draft_tokens"),
            "use a draft model closer to the target (or n-gram/EAGLE for this traffic)",
            "turn speculative decoding off at high batch sizes",
        ),
    )


@rule("speculative.acceptance_decay", _L, ("spec.acceptance_decay",))
def acceptance_decay(ev: Evidence, t: Thresholds) -> Finding | None:
    decay = ev.get("spec.acceptance_decay") or 0.0
    if decay >= t.acceptance_decay:
        return None
    return make_finding(
        "speculative.acceptance_decay",
        _L,
        bottleneck=False,
        severity=severity_below(decay, t.acceptance_decay, 0.0),
        explains=0.3,
        title=f"the last draft position is accepted {decay:.0%} as often as the first",
        evidence=ev,
        used=(("spec.acceptance_decay", t.acceptance_decay),),
        explanation="Late draft positions are almost never accepted; they cost verify time.",
        next_steps=("lower `num_speculative_tokens`" + current(ev, "spec.num_draft_tokens"),),
    )
