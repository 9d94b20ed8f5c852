"""diagnose, level 3: memory-layer rules of a KV offload tier (issue 33) — a tier that does
not pay for itself.

A host-memory tier (vLLM's native CPU offloading, LMCache, SGLang HiCache) pays when the
prefixes the GPU cache evicted come back from it faster than they would be recomputed. It
does not pay when its lookups find little (too small to outlive the GPU's own cache, or a
workload without reuse) while every computed block is still copied to it, or when a load
takes longer than the prefill it replaces (a slow host→GPU path). The rule runs only where
a tier is known to exist (`offload.tier`: stores, a host-tier gauge): a connector that only
moves KV between prefill and decode instances asks and hits, but stores nothing here.
"""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above, severity_below
from infertriage.diagnose.symptom import flag, slo_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.MEMORY


def _slow_load(ev: Evidence, t: Thresholds) -> float | None:
    """A load's seconds per token over the deployment's recompute seconds per token, when
    loads are the slower and enough tokens were loaded to say so; else None."""
    load, recompute = ev.get("offload.load_s_per_token"), ev.get("offload.recompute_s_per_token")
    loaded = ev.get("offload.loaded_tokens") or 0.0
    if load is None or not recompute or loaded * 10 < t.offload_min_queries:
        return None
    ratio = load / recompute
    return ratio if ratio > t.offload_load_vs_recompute else None


def _few_hits(ev: Evidence, t: Thresholds) -> float | None:
    """The tier's hit share, when it is below `offload_hit_share` over enough lookups."""
    share, queries = ev.get("offload.hit_share"), ev.get("offload.external_queries") or 0.0
    if share is None or queries < t.offload_min_queries or share >= t.offload_hit_share:
        return None
    return share


# needs only the KV usage every scraped engine gives: without a tier it is silent, and a
# server with none must not list offload counters as missing evidence
@rule("memory.offload_not_paying", _L, ("kv.usage_max",))
def offload_not_paying(ev: Evidence, t: Thresholds) -> Finding | None:
    if (ev.get("offload.tier") or 0.0) < 1:
        return None
    few, slow = _few_hits(ev, t), _slow_load(ev, t)
    if few is None and slow is None:
        return None
    full = (ev.get("offload.host_usage_max") or 0.0) >= t.offload_tier_full
    said = []
    if few is not None:
        said.append(f"its lookups found {few:.1%} of the tokens asked")
    if slow is not None:
        said.append(f"a load takes {slow:.1f}× the prefill it replaces")
    if full and few is not None:
        said.append("it is full, evicting what it just stored")
    size = flag(ev, Knob.OFFLOAD_SIZE)
    return make_finding(
        "memory.offload_not_paying",
        _L,
        bottleneck=slow is not None and slo_missed(ev, t),
        # full while finding little: it evicts what it just stored, the worst of it
        severity=1.0
        if full and few is not None
        else max(
            severity_below(few, t.offload_hit_share, 0.0) if few is not None else 0.0,
            severity_above(slow, t.offload_load_vs_recompute, 3.0) if slow is not None else 0.0,
        ),
        # a tier that finds nothing costs PCIe bytes and host memory, not the run's latency;
        # one that loads slower than recompute adds the difference to TTFT
        explains=0.2 if slow is None else min(1.0, 1.0 - 1.0 / slow),
        title="the KV offload tier does not pay: " + "; ".join(said),
        evidence=ev,
        used=(
            ("offload.hit_share", t.offload_hit_share),
            ("offload.external_queries", t.offload_min_queries),
            ("offload.returned_share", None),
            ("offload.store_bytes", None),
            ("offload.load_s_per_token", None),
            ("offload.recompute_s_per_token", None),
            ("offload.host_usage_max", t.offload_tier_full),
        ),
        explanation=(
            "Every block the GPU computes is copied to the host tier, so a tier that holds no "
            "more than the GPU's own prefix cache (or a workload that never repeats a prefix) "
            "pays the copies and hits nothing; and a load over a slow host→GPU path costs more "
            "than recomputing the prefix."
        ),
        next_steps=(
            f"size the tier above the GPU's KV cache with room for the reused prefixes: "
            f"`{size}` (vLLM, GiB; SGLang `--hicache-size` GB or `--hicache-ratio`; LMCache "
            "`LMCACHE_MAX_LOCAL_CPU_SIZE`)",
            "turn it off for a workload without reuse (drop vLLM's `--kv-offloading-size` / "
            "`--kv-transfer-config`, SGLang's `--enable-hierarchical-cache`)",
            "route each session to the replica that holds its prefix (a prefix-aware balancer) "
            "so reuse lands where the KV is",
            "check the host→GPU path of a slow load: pinned host memory, the PCIe link's "
            "generation and width (`nvidia-smi -q -d PCIE`), the GPU's NUMA node",
        ),
    )
