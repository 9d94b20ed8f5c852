"""diagnose, level 3: did the load client and the server share a saturated host?

Takes `Evidence` and `Thresholds`; gives, in words, why the host was contended
when the server runs on the load client's host and that host's CPU was
saturated — busy at least `host_cpu_saturated` of the time, at least
`host_other_cpu_share` of it by processes other than the server, with more threads
runnable per core than `host_run_queue_per_core` or the server's threads
waiting for a CPU `server_cpu_wait_share` of their runnable time — else "".
Threads that wait for a CPU add to every latency the client measures and to
the server's own, and a co-runner slows the CPU time a thread needs; so a rule
that reads a thread's CPU or the client-vs-server split gives, on such a run,
a warning with a caveat (`caveat_of`) instead of blaming the server.
"""

from __future__ import annotations

from collections.abc import Sequence

from infertriage.diagnose.evidence import Evidence
from infertriage.schemas import Thresholds

__all__ = ["RERUN_STEPS", "caveat_of", "contention", "contention_used", "with_rerun"]

RERUN_STEPS = (
    "rerun the load from another host (`--url http://SERVER:PORT` from a second machine), "
    "so that the client's CPU is not the server's",
    "or lighten the client on this host: fewer streams (`--concurrency N`); `bench --workers N` "
    "helps only where one client process is itself the limit (`application.client_bound`)",
    "or pin them apart: the server on some cores, infertriage on the others (`taskset -c`)",
)


def contention(ev: Evidence, t: Thresholds) -> str:
    """Why the shared host was contended ("the load client and the server shared …"), or ""."""
    if (ev.get("host.server_local") or 0.0) < 1:
        return ""
    cpu = ev.get("host.cpu_mean")
    if cpu is None or cpu < t.host_cpu_saturated:
        return ""
    other = ev.get("host.other_cpu_share")
    if other is not None and other < t.host_other_cpu_share:
        return ""  # the server's own threads fill the host: nothing else takes its CPU
    queue = ev.get("host.run_queue_per_core")
    wait = ev.get("proc.cpu_wait_share")
    queued = queue is not None and queue >= t.host_run_queue_per_core
    starved = wait is not None and wait >= t.server_cpu_wait_share
    if not (queued or starved) and (queue is not None or wait is not None):
        return ""  # busy, but every runnable thread found a CPU
    parts = [f"host CPU {cpu:.0%} busy"]
    if other is not None:
        parts.append(f"{other:.0%} of it not the server's")
    if queue is not None:
        parts.append(f"{queue:.1f} runnable threads per core")
    if wait is not None:
        parts.append(f"the server's threads waited for a CPU {wait:.0%} of their runnable time")
    client, cores = ev.get("host.client_cpu_cores"), ev.get("host.cores")
    if client is not None:
        of = f" of {cores:.0f}" if cores else ""
        parts.append(f"the load client used {client:.1f}{of} cores")
    return f"{_who(other, client, cores)} ({'; '.join(parts)})"


def _who(other: float | None, client: float | None, cores: float | None) -> str:
    """Whose CPU it was: the load client's, or mostly other processes' on the host."""
    others = other * cores if other is not None and cores else None
    if others is not None and client is not None and client < others / 2:
        return "the server shared a saturated host with other processes"
    return "the load client and the server shared a saturated host"


def caveat_of(ev: Evidence, t: Thresholds, what: str) -> str:
    """The caveat of a finding about `what` on a contended host, or "" on a free one."""
    reason = contention(ev, t)
    if not reason:
        return ""
    return (
        f"{reason}: {what} cannot be told apart from that contention here, so it is a warning, "
        "not the server's bottleneck; rerun the load from another host to tell"
    )


def with_rerun(caveat: str, steps: Sequence[str]) -> tuple[str, ...]:
    """The rule's next steps, led by the rerun from another host when it carries a caveat."""
    return (RERUN_STEPS[0], *steps) if caveat else tuple(steps)


def contention_used(caveat: str, t: Thresholds) -> tuple[tuple[str, float | None], ...]:
    """The host signals (and their thresholds) a caveated finding shows as evidence."""
    if not caveat:
        return ()
    return (
        ("host.cpu_mean", t.host_cpu_saturated),
        ("host.run_queue_per_core", t.host_run_queue_per_core),
        ("proc.cpu_wait_share", t.server_cpu_wait_share),
        ("host.other_cpu_share", t.host_other_cpu_share),
        ("host.client_cpu_cores", None),
    )
