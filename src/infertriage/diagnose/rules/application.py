"""diagnose, level 3: application-layer rules — the API server, the network path, the client."""

from __future__ import annotations

from infertriage.analyze.stats.binomial import requests_to_settle
from infertriage.diagnose.contention import (
    RERUN_STEPS,
    caveat_of,
    contention,
    contention_used,
    with_rerun,
)
from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above
from infertriage.diagnose.symptom import engine_flag, error_counts, flag, slo_missed, ttft_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.APPLICATION


@rule("application.client_vs_server_ttft", _L, ("client.ttft_p50_s", "server.ttft_p50_s"))
def client_vs_server_ttft(ev: Evidence, t: Thresholds) -> Finding | None:
    client, server = ev.get("client.ttft_p50_s") or 0.0, ev.get("server.ttft_p50_s") or 0.0
    gap = client - server
    # most of the client's wait must lie outside the engine: at least as long as the engine's,
    # and longer than the engine reports for its slow requests (p95); a client median inside
    # the engine's own spread is the engine's queue seen over another window (a closed loop's
    # fast first burst counted by the server's histogram, then a full KV cache), not a front end
    tail = ev.get("server.ttft_p95_s")
    if gap < max(t.client_ttft_gap_s, server) or (tail is not None and client <= tail):
        return None
    # on a host the client saturates, the gap may be threads waiting for a CPU, both sides'
    caveat = caveat_of(ev, t, "the wait in front of the engine")
    return make_finding(
        "application.client_vs_server_ttft",
        _L,
        bottleneck=ttft_missed(ev, t),
        caveat=caveat,
        severity=severity_above(gap, t.client_ttft_gap_s, t.ttft_p95_s * 2),
        explains=gap / client if client > 0 else 0.0,
        title=f"clients wait {gap * 1e3:.0f} ms longer for the first token than the engine reports",
        evidence=ev,
        used=(
            # the client TTFT this rule fires at: past the gap and the engine's own spread
            ("client.ttft_p50_s", max(server + max(t.client_ttft_gap_s, server), tail or 0.0)),
            ("server.ttft_p50_s", None),
            ("server.ttft_p95_s", None),
            *contention_used(caveat, t),
        ),
        explanation=(
            "The engine produced the first token early; the time went in front of it: the API "
            "server (tokenisation, detokenisation, serialisation), a gateway or the network."
        ),
        next_steps=with_rerun(
            caveat,
            (
                "run more API-server processes (`--api-server-count`) or a faster tokenizer",
                "measure from inside the gateway to split gateway time from server time",
            ),
        ),
    )


@rule("application.frontend_saturated", _L, ("proc.frontend_thread_cpu",))
def frontend_saturated(ev: Evidence, t: Thresholds) -> Finding | None:
    busy = ev.get("proc.frontend_thread_cpu") or 0.0
    if busy < t.frontend_thread_busy:
        return None
    # a co-runner slows the thread (shared caches, SMT siblings): its CPU share is not its own
    caveat = caveat_of(ev, t, "the API-server thread's CPU share")
    return make_finding(
        "application.frontend_saturated",
        _L,
        bottleneck=True,
        caveat=caveat,
        severity=severity_above(busy, t.frontend_thread_busy, 1.0),
        explains=0.9,
        title=f"the API-server thread is {busy:.0%} busy on the CPU",
        evidence=ev,
        used=(("proc.frontend_thread_cpu", t.frontend_thread_busy), *contention_used(caveat, t)),
        explanation=(
            "One Python thread tokenises, detokenises and serialises every stream; at 100 % it "
            "delays all of them, whatever the GPU does."
        ),
        next_steps=with_rerun(
            caveat,
            (
                "scale the API server out (`--api-server-count N`, or more replicas behind a "
                "balancer)",
                "stream fewer, larger chunks; disable per-chunk usage (`continuous_usage_stats`)",
            ),
        ),
    )


def _frontend_steps(ev: Evidence) -> tuple[str, ...]:
    """What lowers the API server's per-token work, in the engine's own flags."""
    known = engine_flag(ev, Knob.API_SERVERS) is not None
    servers = f"run more API-server processes (`{flag(ev, Knob.API_SERVERS)} N`" + (
        ")" if known else "; SGLang: `--tokenizer-worker-num N`), or more replicas"
    )
    return (
        servers,
        f"stream fewer, larger chunks: `{flag(ev, Knob.STREAM_INTERVAL)} N` gathers N tokens "
        "a chunk; leave per-chunk usage off (`stream_options.continuous_usage_stats`)",
        f"take detokenising off the API server's hot path: `{flag(ev, Knob.SKIP_TOKENIZER)}` "
        "with token ids in and out (the client detokenises), or a fast (Rust) tokenizer",
    )


@rule(
    "application.frontend_per_token",
    _L,
    ("proc.frontend_cpu_per_token_s", "client.throughput_tok_s"),
)
def frontend_per_token(ev: Evidence, t: Thresholds) -> Finding | None:
    """The API server's work per streamed token takes a share of every inter-token interval.

    Its CPU per token × the tokens streamed per second is the share of each interval it
    works (detokenising, serialising, writing every stream's chunk). Where the API server
    shares a GIL or a loop with the engine (vLLM V0, the twin) that time is added to every
    step; apart (vLLM V1) it delays every chunk once it nears a core. It is CPU time, not
    wall time, so a co-runner on the host does not make it: no contention caveat.
    """
    cost = ev.get("proc.frontend_cpu_per_token_s") or 0.0
    share = min(1.0, cost * (ev.get("client.throughput_tok_s") or 0.0))
    if cost < t.frontend_token_cost_s or share < t.frontend_token_share:
        return None
    # apart from the engine core the API server's work costs the streams nothing until its
    # busiest thread nears a core
    apart = (ev.get("proc.engine_apart") or 0.0) > 0
    if apart and (ev.get("proc.frontend_thread_cpu") or 0.0) < t.frontend_busy_apart:
        return None
    # the engine core's thread saturated too: the host time between steps is its own
    # (`scheduling.engine_loop_cpu`), and this one a warning beside it
    engine_bound = (ev.get("proc.engine_thread_cpu") or 0.0) >= t.engine_thread_busy
    # the interval as the engine streams it: a client behind a slow API server reads bursts
    itl = ev.get("server.itl_p50_s") or ev.get("client.itl_p50_s")
    of_itl = "" if not itl else f" ({share * itl * 1e3:.1f} of its {itl * 1e3:.1f} ms p50)"
    # prompts queue behind that work to be tokenised: the wait in front of the engine is its
    # part of a TTFT miss
    client, server = ev.get("client.ttft_p50_s") or 0.0, ev.get("server.ttft_p50_s")
    waited = (client - server) / client if client > 0 and server is not None else 0.0
    waited = min(1.0, waited) if ttft_missed(ev, t) else 0.0
    if waited > 0:
        of_itl += f"; {waited:.0%} of TTFT p50 is spent in front of the engine"
    return make_finding(
        "application.frontend_per_token",
        _L,
        bottleneck=slo_missed(ev, t) and not engine_bound,
        severity=max(
            severity_above(share, t.frontend_token_share, 1.0),
            severity_above(cost, t.frontend_token_cost_s, 10 * t.frontend_token_cost_s),
        ),
        explains=max(share, waited),
        title=(
            f"the API server spends {cost * 1e6:.0f} µs of CPU per streamed token: "
            f"{share:.0%} of every inter-token interval{of_itl}"
        ),
        evidence=ev,
        used=(
            ("proc.frontend_cpu_per_token_s", t.frontend_token_cost_s),
            ("client.throughput_tok_s", t.frontend_token_share / cost),
            ("proc.frontend_cpu", None),
            ("proc.engine_cpu", None),
            ("server.itl_p50_s", None),
            ("client.ttft_p50_s", None),
            ("server.ttft_p50_s", None),
            ("proc.engine_thread_cpu", t.engine_thread_busy),
            ("proc.engine_apart", None),
            ("proc.frontend_thread_cpu", t.frontend_busy_apart if apart else None),
        ),
        explanation=(
            "Each streamed token costs the API-server process CPU (detokenising, building and "
            "writing its chunk), and one process serves every stream in turn: the engine's "
            "steps and the prompts waiting to be tokenised wait behind that work, so the GPU "
            "waits on the host and ITL and TTFT grow although the engine core is not busy."
        ),
        next_steps=_frontend_steps(ev),
    )


@rule("application.buffering_proxy", _L, ("client.itl_p95_s", "server.itl_p95_s"))
def buffering_proxy(ev: Evidence, t: Thresholds) -> Finding | None:
    client, server = ev.get("client.itl_p95_s") or 0.0, ev.get("server.itl_p95_s") or 0.0
    if server <= 0 or client < t.client_itl_over_server * server or client < t.itl_p95_s:
        return None
    return make_finding(
        "application.buffering_proxy",
        _L,
        bottleneck=False,
        severity=severity_above(client / server, t.client_itl_over_server, 10.0),
        explains=0.5,
        title=f"client ITL p95 {client * 1e3:.0f} ms vs {server * 1e3:.0f} ms inside the server",
        evidence=ev,
        used=(("client.itl_p95_s", t.client_itl_over_server * server), ("server.itl_p95_s", None)),
        explanation="Tokens leave the engine steadily but reach the client in bursts: a buffer.",
        next_steps=("disable response buffering in the proxy (`proxy_buffering off` in nginx)",),
    )


@rule("application.error_rate", _L, ("client.num_requests", "client.num_errors"))
def error_rate(ev: Evidence, t: Thresholds) -> Finding | None:
    counts = error_counts(ev)
    if counts is None or counts.rate <= t.error_rate:
        return None
    proven = counts.low > t.error_rate  # the whole 95 % interval above the SLO
    seen = (
        f"{counts.num_errors} of {counts.num_requests} requests failed ({counts.rate:.1%}; 95 % "
        f"interval {counts.low:.2%}–{counts.high:.2%})"
    )
    steps = ["read the server log at the failure times; `infertriage bench` lists kinds"]
    title = f"{seen}: over the error-rate SLO of {t.error_rate:.2%}"
    if not proven:
        needed = requests_to_settle(counts.rate, t.error_rate) or counts.num_requests
        title = (
            f"{seen}: too few requests to tell it from the SLO of {t.error_rate:.2%}; "
            f"about {needed:,} requests at this rate would settle it"
        )
        steps.insert(0, f"run longer (`--duration`) so that the level sends {needed:,} requests")
    return make_finding(
        "application.error_rate",
        _L,
        bottleneck=proven,
        severity=severity_above(counts.rate, t.error_rate, t.error_rate_full),
        explains=1.0,
        title=title,
        evidence=ev,
        used=(
            ("client.num_errors", None),
            ("client.num_requests", None),
            ("client.error_rate", t.error_rate),
            ("client.timeout_rate", None),
        ),
        explanation=(
            "Failed requests (5xx, timeouts, broken streams) are the worst latency; find them in "
            "requests.jsonl by kind. Requests rejected as invalid (4xx), refused for load (429) "
            "or cut by the run's own end are not counted."
        ),
        next_steps=steps,
    )


# Layer: a 429 is decided at the HTTP edge — the API server's admission control (TGI's
# --max-concurrent-requests) or a gateway's rate limit — before the engine's scheduler
# sees the request; the scheduler queues, it does not refuse. So `application`, and a
# warning: the server declining load it will not queue is protection, not a failure.
@rule("application.admission_control", _L, ("client.admission_rate",))
def admission_control(ev: Evidence, t: Thresholds) -> Finding | None:
    rate = ev.get("client.admission_rate") or 0.0
    if rate <= t.error_rate:
        return None
    return make_finding(
        "application.admission_control",
        _L,
        bottleneck=False,
        severity=severity_above(rate, t.error_rate, t.error_rate_full),
        explains=rate,
        title=f"the server refused {rate:.1%} of requests for load (HTTP 429)",
        evidence=ev,
        used=(("client.admission_rate", t.error_rate),),
        explanation=(
            "HTTP 429 is admission control or a rate limit in front of the engine declining "
            "load it will not queue. It is not a failure and not in the error rate; the "
            "requests it let in are judged as usual, but the load served is not the load sent."
        ),
        next_steps=(
            "raise the limit that answers 429: TGI `--max-concurrent-requests`, the gateway's "
            "or the API key's rate limit",
            "add replicas, or offer less load (`--rate`, `--concurrency`)",
        ),
    )


@rule(
    "application.stream_cut",
    _L,
    ("client.stream_cut_fraction", "client.stream_cut_at_s"),
)
def stream_cut(ev: Evidence, t: Thresholds) -> Finding | None:
    share = ev.get("client.stream_cut_fraction") or 0.0
    if share < t.stream_cut_fraction:
        return None
    at = ev.get("client.stream_cut_at_s") or 0.0
    return make_finding(
        "application.stream_cut",
        _L,
        bottleneck=True,
        severity=severity_above(share, t.stream_cut_fraction, 0.5),
        explains=share,
        title=f"{share:.0%} of streams cut at about {at:.1f} s",
        evidence=ev,
        used=(
            ("client.stream_cut_fraction", t.stream_cut_fraction),
            ("client.stream_cut_at_s", None),
        ),
        explanation="Streams end at the same elapsed time however long they were: a timeout.",
        next_steps=("raise the gateway's read/idle timeout above the longest generation",),
    )


@rule("application.client_bound", _L, ("client.bound",))
def client_bound(ev: Evidence, t: Thresholds) -> Finding | None:
    if (ev.get("client.bound") or 0.0) < 1:
        return None
    return make_finding(
        "application.client_bound",
        _L,
        bottleneck=False,
        severity=1.0,
        explains=0.5,
        title="the load client itself fell behind; its figures are not trustworthy",
        evidence=ev,
        used=(("client.bound", 0.0),),
        explanation="The client's event loop lagged; measured latency includes its own delay.",
        next_steps=("rerun with `--workers N` or from a bigger machine",),
    )


@rule("application.server_restarted", _L, ("server.restarts",))
def server_restarted(ev: Evidence, t: Thresholds) -> Finding | None:
    restarts = ev.get("server.restarts") or 0.0
    if restarts < 1:
        return None
    return make_finding(
        "application.server_restarted",
        _L,
        bottleneck=True,
        severity=1.0,
        explains=1.0,
        title=f"the server restarted {restarts:.0f} time(s) during the run (crash or OOM)",
        evidence=ev,
        used=(("server.restarts", 0.0),),
        explanation="Counters went back or the process start time changed mid-run.",
        next_steps=("read the server's log and `dmesg` for an OOM kill at that time",),
    )


def beyond_chance(
    excess: float | None, chance: float | None, requests: float | None, t: Thresholds
) -> tuple[bool, str]:
    """Whether the busiest replica's lead is more than a few arrivals' chance, and how it
    reads: it holds `min_excess_requests` more in flight than the mean replica
    (`fleet.busiest_excess`), or it finished `replica_imbalance` × the mean replica's requests
    (`requests`: `fleet.request_imbalance`) and an even split would rarely
    (`routing_chance_max`) give it as many (`fleet.routing_chance`) — a difference of a few
    per cent over hours is significant and no imbalance. With none of them (an engine without
    queue gauges or a request counter) the ratio alone is all there is, and the words say
    so. `metrics --prometheus` flags its rows by the same test."""
    held = excess is not None and excess >= t.min_excess_requests
    skewed = (
        chance is not None
        and chance <= t.routing_chance_max
        and (requests or 0.0) >= t.replica_imbalance
    )
    said = []
    if excess is not None:
        said.append(f"{excess:.2g} requests in flight above the mean")
    if chance is not None and requests is not None:
        said.append(
            f"{requests:.3g}× the mean replica's requests, which an even split gives with "
            f"p = {chance:.2g}"
        )
    if excess is None and chance is None:
        said.append("no queue gauge or request count tells it from chance")
    return held or skewed or (excess is None and chance is None), "; ".join(said)


@rule("application.replica_imbalance", _L, ("fleet.replicas",))
def replica_imbalance(ev: Evidence, t: Thresholds) -> Finding | None:
    """The busiest replica does far more of the work than the mean replica.

    Named only beyond a few arrivals' chance (`beyond_chance`): replicas that each hold a
    request or less and finish requests evenly are mostly idle, and their ratio is chance;
    and not when a replica came or went within the window (`fleet.replicas_partial`).
    """
    ratio = ev.get("fleet.imbalance") or 0.0
    if ratio < t.replica_imbalance or (ev.get("fleet.replicas_partial") or 0.0) >= 1:
        return None  # a replica that came or went mid-window is compared over another span
    real, said = beyond_chance(
        ev.get("fleet.busiest_excess"),
        ev.get("fleet.routing_chance"),
        ev.get("fleet.request_imbalance"),
        t,
    )
    if not real:
        return None
    replicas = max(2.0, ev.get("fleet.replicas") or 2.0)
    return make_finding(
        "application.replica_imbalance",
        _L,
        bottleneck=ttft_missed(ev, t),
        severity=severity_above(ratio, t.replica_imbalance, replicas),
        explains=min(1.0, (ratio - 1.0) / (replicas - 1.0)),
        title=f"one of {replicas:.0f} replicas does {ratio:.1f}× the mean replica's work ({said})",
        evidence=ev,
        used=(
            ("fleet.imbalance", t.replica_imbalance),
            ("fleet.busiest_excess", t.min_excess_requests),
            ("fleet.routing_chance", t.routing_chance_max),
            ("fleet.request_imbalance", t.replica_imbalance),
            ("fleet.replicas", None),
        ),
        explanation=(
            "The load balancer in front of the replicas spreads requests unevenly: the busiest "
            "replica queues while others idle, so the fleet's latency is that replica's."
        ),
        next_steps=(
            "balance by outstanding requests or KV use, not round-robin over connections "
            "(HTTP keep-alive pins clients to a replica)",
            "compare the replicas' `vllm:num_requests_running` in Prometheus by instance",
        ),
    )


@rule("application.host_contention", _L, ("host.server_local", "host.cpu_mean"))
def host_contention(ev: Evidence, t: Thresholds) -> Finding | None:
    """The load client and the server on one saturated host: a caveat on the map, never a cause."""
    reason = contention(ev, t)
    if not reason:
        return None
    wait, queue = ev.get("proc.cpu_wait_share"), ev.get("host.run_queue_per_core")
    # the share of the server's runnable time without a CPU, or of the host's runnable threads
    waiting = wait if wait is not None else (1.0 - 1.0 / queue if queue and queue > 1 else None)
    return make_finding(
        "application.host_contention",
        _L,
        bottleneck=False,
        severity=severity_above(ev.get("host.cpu_mean") or 0.0, t.host_cpu_saturated, 1.0),
        explains=waiting if waiting is not None else 0.5,
        title="the load client and the server share this host, and its CPU was saturated",
        evidence=ev,
        used=contention_used(reason, t),
        explanation=(
            f"{reason}. Threads waiting for a CPU add to every latency the client measures and "
            "to the server's own, so this run's front-end CPU and client-vs-server split "
            "describe the shared host, not the server: those findings are warnings here."
        ),
        next_steps=RERUN_STEPS,
        caveat=reason,
    )
