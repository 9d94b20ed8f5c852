"""diagnose, level 3: run the rules, rank the findings, find the root cause, build the map.

Takes `Evidence` and `Thresholds`; gives the `Diagnosis`: all seven layers
with their status, score, findings and missing evidence; the primary
bottleneck — the root of the highest-scoring bottleneck's causal chain —
and that chain; the SLO results; whether the client was the bottleneck.
"""

from __future__ import annotations

from collections.abc import Iterable

from infertriage.diagnose import rules as _rules  # noqa: F401 — importing registers the rules
from infertriage.diagnose.evidence import SIGNALS, Evidence
from infertriage.diagnose.registry import RULES, Rule
from infertriage.diagnose.symptom import misses, slo_results
from infertriage.schemas import (
    LAYER_ORDER,
    ChainLink,
    Diagnosis,
    Finding,
    Layer,
    LayerResult,
    Primary,
    Status,
    Thresholds,
    Unexplained,
)
from infertriage.schemas.artefacts import split_artefact

__all__ = ["CAUSES", "diagnose_evidence", "run_rules", "trace_findings"]

# cause → effects: a present cause is the root of its effects.
CAUSES: dict[str, tuple[str, ...]] = {
    "memory.kv_leak": ("memory.kv_pressure",),
    "memory.kv_pressure": (
        "scheduling.queue_dominates_ttft",
        "scheduling.unbounded_queue",
        "hardware.below_roofline",
    ),
    "scheduling.queue_dominates_ttft": ("scheduling.unbounded_queue",),
    "scheduling.prefill_token_budget": (
        "scheduling.queue_dominates_ttft",
        "scheduling.unbounded_queue",
    ),
    "kernel.launch_bound": ("hardware.busy_not_computing", "hardware.below_roofline"),
    # the engine's own lines say the decode ran eagerly: the launch gaps a trace would show
    # (a start-up setting alone, `kernel.graphs_off`, is never a cause: many run eager fine)
    "kernel.eager_decode": ("hardware.busy_not_computing", "hardware.below_roofline"),
    "kernel.unfused_attention": ("hardware.below_roofline",),
    "application.frontend_saturated": (
        "application.client_vs_server_ttft",
        "hardware.below_roofline",
        "kernel.host_wait",
        "scheduling.step_cpu_gap",
    ),
    "parallelism.communication_share": (
        "hardware.below_roofline",
        "hardware.busy_not_computing",
    ),
    "speculative.low_acceptance": ("hardware.below_roofline",),
    # P/D: a pool too small for its share of the load is where its queue and full KV come
    # from; a slow KV link is what the log's transfer times show
    "parallelism.pd_ratio_mismatch": (
        "memory.kv_pressure",
        "scheduling.queue_dominates_ttft",
        "scheduling.unbounded_queue",
    ),
    # requests waiting for their KV to arrive read as a decode queue
    "parallelism.kv_transfer_bound": ("parallelism.kv_transfer", "parallelism.pd_ratio_mismatch"),
    # requests stranded on one data-parallel rank are the server's queue
    "parallelism.dp_rank_imbalance": (
        "scheduling.queue_dominates_ttft",
        "scheduling.unbounded_queue",
    ),
    # prefixes prefilled again on a replica that lacks them: the queue and the prefill work
    "parallelism.prefix_affinity_lost": (
        "scheduling.queue_dominates_ttft",
        "memory.prefix_cache_low",
    ),
    # requests held up in front of the engine reach it late: the GPU waits, the queue looks long
    "application.client_vs_server_ttft": (
        "kernel.host_wait",
        "scheduling.step_cpu_gap",
        "hardware.below_roofline",
    ),
    "scheduling.engine_loop_cpu": (
        "kernel.host_wait",
        "hardware.busy_not_computing",
        "scheduling.step_cpu_gap",
    ),
    "scheduling.step_cpu_gap": ("kernel.host_wait", "hardware.below_roofline"),
    # last, so that a present engine-core finding is the root of the host wait it shares
    # (`_root_of` takes the first present cause): host time defers to the API server only
    # when the engine core is not CPU-bound
    "application.frontend_per_token": (
        "application.client_vs_server_ttft",
        "kernel.host_wait",
        "scheduling.step_cpu_gap",
        "hardware.below_roofline",
        "hardware.busy_not_computing",
    ),
}


def run_rules(evidence: Evidence, thresholds: Thresholds) -> tuple[list[Finding], list[Rule]]:
    """Findings of every rule that could run, and the rules that could not."""
    findings: list[Finding] = []
    skipped: list[Rule] = []
    for registered in RULES.values():
        if registered.missing(evidence):
            skipped.append(registered)
            continue
        finding = registered.fn(evidence, thresholds)
        if finding is not None:
            findings.append(finding)
    return findings, skipped


def trace_findings(evidence: Evidence, thresholds: Thresholds) -> tuple[Finding, ...]:
    """The rules over a trace's signals alone, worst first: the `trace` command's verdicts.

    Rules that need other evidence (load, metrics, the plan) are skipped silently; the
    trace and `diagnose` judge one trace by the same rules and thresholds.
    """
    findings, _ = run_rules(evidence, thresholds)
    return tuple(sorted(findings, key=lambda f: -f.score))


def _not_applicable(layer: Layer, evidence: Evidence) -> bool:
    if layer is Layer.SPECULATIVE:
        drafts = evidence.get("spec.num_draft_tokens")
        return drafts == 0 or (drafts is None and not evidence.has("spec.acceptance_rate"))
    if layer is Layer.PARALLELISM:
        tp = evidence.get("config.tensor_parallel")
        multi_rank = (
            evidence.has("trace.rank_skew_fraction")
            or (evidence.get("dp.ranks") or 0) >= 2
            or evidence.has("pd.prefill_instances")  # prefill/decode on separate instances
            or evidence.has("pd.decode_instances")
            or evidence.has("pd.transfer_time_mean_s")
        )
        return (tp is None or tp <= 1) and not multi_rank
    return False


def _set_aside(name: str, evidence: Evidence) -> str | None:
    """Why a signal is missing when its metric's value could not be true (an artefact)."""
    for found, signal in evidence.signals.items():
        metric = (split_artefact(found) or ("", ""))[1]
        if metric and (name == metric or name.startswith(metric + "_")):
            return f"the value read ({signal.source}) cannot be true and was set aside"
    return None


def _missing(skipped: Iterable[Rule], evidence: Evidence) -> tuple[str, ...]:
    lines: dict[str, None] = {}
    scraped = evidence.has("server.ttft_mean_s") or evidence.has("kv.usage_max")
    logged = any(signal.source == "log" for signal in evidence.signals.values())
    for registered in skipped:
        for name in registered.missing(evidence):
            read = logged if name.startswith(("log.", "pd.")) else scraped
            hint = _set_aside(name, evidence) or SIGNALS[name].hint(read)
            lines[f"{name}: {hint}"] = None
    return tuple(lines)


def _layer_result(
    layer: Layer, findings: list[Finding], skipped: list[Rule], evidence: Evidence
) -> LayerResult:
    mine = sorted((f for f in findings if f.layer is layer), key=lambda f: -f.score)
    not_run = [r for r in skipped if r.layer is layer]
    # a rule that needs no signal (metric artefacts) ran on nothing of this layer
    ran_any = any(r.layer is layer and r.needs for r in RULES.values() if r not in not_run)
    if any(f.status is Status.BOTTLENECK for f in mine):
        status = Status.BOTTLENECK
    elif mine:
        status = Status.WARNING
    elif _not_applicable(layer, evidence):
        status = Status.NOT_APPLICABLE
    elif not ran_any:
        status = Status.UNKNOWN
    else:
        status = Status.OK
    return LayerResult(
        layer=layer,
        status=status,
        score=max((f.score for f in mine), default=0.0),
        findings=tuple(mine),
        missing=() if status is Status.NOT_APPLICABLE else _missing(not_run, evidence),
    )


def _root_of(finding_id: str, present: set[str]) -> str:
    """Walk from an effect up to the farthest present cause."""
    seen = {finding_id}
    current = finding_id
    while True:
        causes = [c for c, effects in CAUSES.items() if current in effects and c in present]
        causes = [c for c in causes if c not in seen]
        if not causes:
            return current
        current = causes[0]
        seen.add(current)


def _chain_from(root: str, by_id: dict[str, Finding]) -> tuple[ChainLink, ...]:
    links, frontier, seen = [], [root], {root}
    while frontier:
        current = frontier.pop(0)
        finding = by_id[current]
        links.append(ChainLink(layer=finding.layer, finding=current, effect=finding.title))
        for effect in CAUSES.get(current, ()):
            if effect in by_id and effect not in seen:
                seen.add(effect)
                frontier.append(effect)
    return tuple(links)


def _effects_of(causes: set[str]) -> set[str]:
    """Every finding id the given causes lead to, directly or through others."""
    found: set[str] = set()
    frontier = list(causes)
    while frontier:
        for effect in CAUSES.get(frontier.pop(), ()):
            if effect not in found:
                found.add(effect)
                frontier.append(effect)
    return found


def _promote_root(findings: list[Finding]) -> tuple[list[Finding], str | None]:
    """The primary: the root cause of the top-scoring bottleneck, itself made a bottleneck.

    A finding with a caveat (the load client shared a saturated host with the server,
    say) is never the root, nor is a bottleneck it would explain: with the front end
    starved of CPU, the engine waiting on it says nothing of the engine.
    """
    caveated = {f.id for f in findings if f.caveat}
    explained, present = _effects_of(caveated), {f.id for f in findings} - caveated
    # each bottleneck's root, unless a caveated finding would explain that root too
    roots = {
        f.id: root
        for f in findings
        if f.status is Status.BOTTLENECK and (root := _root_of(f.id, present)) not in explained
    }
    findings = _held_back(findings, roots)
    if not roots:
        return findings, None
    top = max((f for f in findings if f.id in roots), key=lambda f: f.score)
    root = roots[top.id]
    promoted = [
        f.model_copy(update={"status": Status.BOTTLENECK}) if f.id == root else f for f in findings
    ]
    return promoted, root


def _held_back(findings: list[Finding], roots: dict[str, str]) -> list[Finding]:
    """Bottlenecks a caveated finding would explain become warnings carrying that caveat.

    The map then says what the primary says: no bottleneck of the server's is shown
    while the host's contention may be all of it.
    """
    reasons = sorted((f.caveat for f in findings if f.caveat), key=len)
    if not reasons:
        return findings
    caveat = (
        f"{reasons[0]}: this follows from a finding that contention may explain, so it is a "
        "warning here; rerun the load from another host to tell"
    )
    return [
        f.model_copy(update={"status": Status.WARNING, "caveat": caveat})
        if f.status is Status.BOTTLENECK and not f.caveat and f.id not in roots
        else f
        for f in findings
    ]


def _unexplained(
    sentence: str, findings: list[Finding], layers: tuple[LayerResult, ...]
) -> Unexplained:
    """Why a missed SLO has no primary, and the evidence that would tell."""
    if any(f.caveat for f in findings):
        why = "contention on this host may explain it (see the caveat)"
    elif findings:
        why = "no bottleneck explains it; the warnings are the candidates"
    else:
        why = "no layer explains it"
    missing = tuple(dict.fromkeys(line for layer in layers for line in layer.missing))
    return Unexplained(line=f"{sentence}; {why}", missing=missing)


def diagnose_evidence(evidence: Evidence, thresholds: Thresholds) -> Diagnosis:
    findings, skipped = run_rules(evidence, thresholds)
    findings, root = _promote_root(findings)
    by_id = {f.id: f for f in findings}
    layers = tuple(_layer_result(layer, findings, skipped, evidence) for layer in LAYER_ORDER)
    missed = misses(evidence, thresholds)
    primary, unexplained = None, None
    chain: tuple[ChainLink, ...] = ()
    if root is not None:
        primary = Primary(layer=by_id[root].layer, finding=root)
        chain = _chain_from(root, by_id)
    elif missed:
        sentence = "; ".join(m.sentence for m in missed)
        unexplained = _unexplained(sentence, findings, layers)
    return Diagnosis(
        layers=layers,
        primary=primary,
        chain=chain,
        slo=slo_results(evidence, thresholds),
        client_bound=(evidence.get("client.bound") or 0.0) >= 1,
        symptom=", ".join(m.symptom for m in missed),
        unexplained=unexplained,
    )
