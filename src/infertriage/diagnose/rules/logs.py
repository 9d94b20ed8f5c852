"""diagnose, level 3: rules over what only a server's own log says (`infertriage logs`).

A stuck engine: requests running, no token generated, for minutes. Metrics
sampled over a load run rarely catch it; the log's stats lines do.
"""

from __future__ import annotations

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above
from infertriage.schemas import Finding, Layer, Thresholds


@rule("scheduling.engine_stuck", Layer.SCHEDULING, ("log.engine_stuck_s",))
def engine_stuck(ev: Evidence, t: Thresholds) -> Finding | None:
    stuck = ev.get("log.engine_stuck_s") or 0.0
    if stuck < t.engine_stuck_s:
        return None
    return make_finding(
        "scheduling.engine_stuck",
        Layer.SCHEDULING,
        bottleneck=True,
        severity=max(0.5, severity_above(stuck, t.engine_stuck_s, t.engine_stuck_full_s)),
        explains=1.0,
        title=f"the engine generated no token for {stuck:.0f} s while requests were running",
        evidence=ev,
        used=(("log.engine_stuck_s", t.engine_stuck_s), ("queue.running_max", None)),
        explanation=(
            "The engine loop stopped making progress with requests admitted: a hung "
            "collective (NCCL) between ranks, a dead worker process, or a deadlock in the "
            "scheduler. Every running and waiting request waits until it is restarted."
        ),
        next_steps=(
            "dump the engine's stacks while it hangs: `py-spy dump --pid ENGINE_PID` "
            "(every rank); with tensor parallelism rerun with `NCCL_DEBUG=INFO`",
            "look just before the stall in the log for a worker's traceback or an XID error "
            "(`dmesg`)",
            "restart on it: a liveness probe that fails when `vllm:num_requests_running` > 0 "
            "and `vllm:generation_tokens_total` has not grown for a minute",
        ),
    )
