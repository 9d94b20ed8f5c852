"""diagnose, level 3: scheduling-layer rules — queueing, the engine loop's CPU, admission."""

from __future__ import annotations

from dataclasses import dataclass

from infertriage.diagnose.evidence import Evidence
from infertriage.diagnose.registry import make_finding, rule, severity_above
from infertriage.diagnose.rules.memory import kv_blocks_short
from infertriage.diagnose.rules.parallelism import engine_running
from infertriage.diagnose.symptom import current, engine_flag, flag, slo_missed, ttft_missed
from infertriage.engines import Knob
from infertriage.schemas import Finding, Layer, Thresholds

_L = Layer.SCHEDULING
# an engine not known: its seat flag under other engines' names too
_OTHER_SEAT_FLAGS = " (llama.cpp: `-np`; SGLang: `--max-running-requests`)"


@rule(
    "scheduling.queue_dominates_ttft",
    _L,
    ("queue.waiting_max", "queue.running_max"),
)
def queue_dominates_ttft(ev: Evidence, t: Thresholds) -> Finding | None:
    """Requests wait for a seat, not for memory: by queue time, or by a full batch with room.

    Engines without latency histograms or KV usage (llama.cpp) are judged by the seats
    alone: every slot taken while requests wait.
    """
    ttft = ev.get("server.ttft_mean_s") or 0.0
    usage = ev.get("kv.usage_max") or 0.0
    # seats are per engine: with data-parallel ranks, the most one rank ran fills them
    waiting, running = ev.get("queue.waiting_max") or 0.0, engine_running(ev)
    seats = ev.get("config.max_num_seqs")
    queue = ev.get("server.queue_time_mean_s")
    share = queue / ttft if queue is not None and ttft > 0 else 0.0
    # the seats the measured level's requests met, when known: an overload step after it
    # fills them by design, and a queue there explains nothing of the measured TTFT
    m_waiting, m_running = (
        ev.get("queue.measured_waiting_max"),
        ev.get("queue.measured_running_max"),
    )
    met_waiting = waiting if m_waiting is None else m_waiting
    met_running = running if m_running is None else m_running
    seats_full = seats is not None and met_running >= seats and met_waiting > 0
    # Seats left empty: the queue waits for the token budget, i.e. the GPU's prefill time
    # (an L4 prefilling 2k-token prompts), not for a cap a scheduling knob would lift.
    seats_free = seats is not None and running < seats
    if usage >= t.kv_room or kv_blocks_short(ev, t) is not None:
        return None  # waiting for memory: the memory layer's finding
    if share < t.queue_share and not seats_full:
        return None
    share_text = (
        f"queueing is {share:.0%} of TTFT"
        if share >= t.queue_share
        else (f"{waiting:.0f} requests wait while all {running:.0f} seats are taken")
    )
    if seats_free:
        share_text += f", {running:.0f} of {seats:.0f} seats used"
    return make_finding(
        "scheduling.queue_dominates_ttft",
        _L,
        bottleneck=ttft_missed(ev, t) and not seats_free,
        severity=max(severity_above(share, t.queue_share, 0.95), 0.6 if seats_full else 0.0),
        explains=max(share, 0.7 if seats_full else 0.0),
        title=share_text
        + (f" while the KV cache has room ({usage:.0%} used)" if ev.has("kv.usage_max") else ""),
        evidence=ev,
        used=(
            ("server.queue_time_mean_s", t.queue_share * ttft),
            ("queue.waiting_max", 0.0),
            ("config.max_num_seqs", None),
            ("kv.usage_max", t.kv_room),
        ),
        explanation=(
            "Requests wait with batch seats free: each step's token budget goes to other "
            "prompts' prefill, so the GPU's prefill speed sets the wait."
            if seats_free
            else "Requests wait for a batch slot, not for memory: the batch is capped below "
            "what the KV cache could hold."
        ),
        next_steps=_queue_steps(ev, seats_free=seats_free),
    )


def _queue_steps(ev: Evidence, *, seats_free: bool) -> tuple[str, ...]:
    """With seats free more seats change nothing: the token budget and prefill speed do."""
    budget = f"raise the token budget `{flag(ev, Knob.TOKEN_BUDGET)}`" + current(
        ev, "config.max_num_batched_tokens", "{:,.0f}"
    )
    if seats_free:
        return (budget, "add replicas, or a GPU with faster prefill, if the GPU is saturated")
    seats = (
        f"raise `{flag(ev, Knob.MAX_SEATS)}`"
        + current(ev, "config.max_num_seqs")
        + ("" if engine_flag(ev, Knob.MAX_SEATS) else _OTHER_SEAT_FLAGS)
    )
    return (seats, budget, "add replicas if the GPU is already saturated")


def _step_budget(ev: Evidence) -> tuple[float, str] | None:
    """The step budget: the server's setting, else the largest step seen (an upper bound,
    where the prompts computed were longer than it)."""
    budget = ev.get("config.max_num_batched_tokens")
    if budget is not None:
        return budget, f"the step budget `--max-num-batched-tokens` is {budget:,.0f}"
    largest = ev.get("server.step_tokens_max")
    if largest is None or _computed_prompt_tokens(ev) <= largest:
        return None
    return largest, f"no engine step exceeded {largest:,.0f} tokens (`iteration_tokens_total`)"


def _computed_prompt_tokens(ev: Evidence) -> float:
    """A prompt's tokens the engine computed on average: its length less the hits the server
    counted. The largest step bounds the budget only where prompts needed a larger one: a
    closed loop of one stream resends the warm-up's prompts, which the cache serves in steps
    of a few tokens whatever the budget. Only the server's own hits count: the reuse the
    client sent is the most a cache could hit, and a cache that is off or evicting hits none
    of it (a server that counts no hits is taken to hit none)."""
    hit = ev.get("prefix_cache.hit_rate") or 0.0
    return (ev.get("client.mean_prompt_tokens") or 0.0) * (1.0 - min(max(hit, 0.0), 1.0))


@rule(
    "scheduling.prefill_token_budget",
    _L,
    ("server.prefill_time_mean_s", "server.ttft_mean_s", "client.mean_prompt_tokens"),
)
def prefill_token_budget(ev: Evidence, t: Thresholds) -> Finding | None:
    """Prefill starved by the token budget: a prompt takes several steps to prefill.

    TTFT is mostly prefill (the server's histograms), or prefill and the wait to be
    scheduled while batch seats are free, and the step budget is smaller than the
    typical prompt, so each prefill is chunked over `prompt / budget` steps, every
    one of them shared with the running decodes.
    """
    ttft, prefill = ev.get("server.ttft_mean_s") or 0.0, ev.get("server.prefill_time_mean_s")
    prompt, found = ev.get("client.mean_prompt_tokens") or 0.0, _step_budget(ev)
    if found is None or prefill is None or ttft <= 0:
        return None
    budget, said = found
    queue_share = (ev.get("server.queue_time_mean_s") or 0.0) / ttft
    prefill_share, steps = prefill / ttft, prompt / budget if budget > 0 else 0.0
    # With seats free the wait to be scheduled is a wait for the budget too (a running
    # prefill's chunks take it); with every seat taken it is the seats' (queue_dominates_ttft).
    seats, running = ev.get("config.max_num_seqs"), engine_running(ev)
    seats_free = seats is not None and running < seats
    starved = prefill_share + (queue_share if seats_free else 0.0)
    if starved < t.prefill_ttft_share or steps < t.prompt_steps:
        return _budget_queue(ev, t, budget, said)
    waited = f" and the wait for it {queue_share:.0%}" if seats_free else ""
    return make_finding(
        "scheduling.prefill_token_budget",
        _L,
        bottleneck=ttft_missed(ev, t),
        severity=severity_above(steps, t.prompt_steps, 8.0),
        explains=min(1.0, starved),
        title=(
            f"prefill is {prefill_share:.0%} of TTFT{waited}: {said}, prompts average "
            f"{prompt:,.0f} tokens, about {steps:.1f} steps each"
        ),
        evidence=ev,
        used=(
            ("server.prefill_time_mean_s", t.prefill_ttft_share * ttft),
            ("client.mean_prompt_tokens", t.prompt_steps * budget),
        ),
        explanation=(
            "Each engine step schedules at most the token budget; a prompt longer than it is "
            "prefilled in chunks over several steps, each also carrying every running decode, "
            "so the first token waits for all of them."
        ),
        next_steps=_budget_steps(ev, prompt),
    )


@dataclass(frozen=True, slots=True)
class _BudgetLoad:
    """The step budget's throughput against the prompts arriving (tokens, seconds)."""

    budget: float  # tokens a step may schedule
    num_decodes: float  # running requests, a token each a step
    prompt_tokens: float  # a typical prompt's tokens (a cache hit is the shared-prefix group's)
    steps_per_s: float | None  # engine steps a second, when measured
    arriving_tok_s: float | None  # prompt tokens to compute (hits excluded) arriving a second

    @property
    def left(self) -> float:
        """Tokens a step leaves for prefill after its decodes."""
        return max(self.budget - self.num_decodes, 0.0)

    @property
    def prompts_per_step(self) -> float:
        return self.left / self.prompt_tokens if self.prompt_tokens > 0 else float("inf")

    @property
    def prefill_tok_s(self) -> float | None:
        return None if self.steps_per_s is None else self.left * self.steps_per_s

    @property
    def load(self) -> float:
        """The share of the budget's prefill throughput the arriving prompts need."""
        room, arriving = self.prefill_tok_s, self.arriving_tok_s
        if room is None or arriving is None:
            return 0.0
        return arriving / room if room > 0 else float("inf")


def _budget_load(ev: Evidence, budget: float) -> _BudgetLoad:
    """Steps a second from `iteration_tokens_total` (one count a step), else one decode step a
    token gap; prompts arriving from the requests finished a second (output ÷ output each),
    less the prefix cache's hits. The typical prompt keeps its hits: they fall on the few
    requests that share a prefix, not evenly on each."""
    hit = min(max(ev.get("prefix_cache.hit_rate") or 0.0, 0.0), 1.0)
    prompt = ev.get("client.mean_prompt_tokens") or 0.0
    steps = ev.get("server.steps_per_s")
    gap = ev.get("server.itl_p50_s")
    if steps is None and gap is not None and gap > 0:
        steps = 1.0 / gap
    done, each = ev.get("client.throughput_tok_s"), ev.get("client.mean_output_tokens")
    arriving = done / each * prompt * (1.0 - hit) if done is not None and each else None
    return _BudgetLoad(budget, engine_running(ev), prompt, steps, arriving)


def _budget_queue(ev: Evidence, t: Thresholds, budget: float, said: str) -> Finding | None:
    """Requests queue with seats free and KV room: the budget's throughput is what they wait
    for when a step's tokens after its decodes hold less than a prompt (prompts prefill one
    at a time, each arrival behind the ones before it) or the prompts arriving need most of
    the prefill tokens its steps leave. The prefill share alone says little then: the wait
    to be scheduled hides it, so the two count together."""
    ttft, seats = ev.get("server.ttft_mean_s") or 0.0, ev.get("config.max_num_seqs")
    if ttft <= 0 or seats is None or engine_running(ev) >= seats:
        return None  # every seat taken: queue_dominates_ttft's
    share = (ev.get("server.queue_time_mean_s") or 0.0) / ttft
    prefill = (ev.get("server.prefill_time_mean_s") or 0.0) / ttft
    usage = ev.get("kv.usage_max") or 0.0
    if share + prefill < t.prefill_ttft_share:
        return None
    if usage >= t.kv_room or kv_blocks_short(ev, t) is not None:
        return None  # waiting for memory: the memory layer's
    b = _budget_load(ev, budget)
    # A histogram bucket's bound may be twice the setting: the fit is then an upper bound
    # and the rule errs towards silence. (The time waited over the mean step rate is no
    # count of steps: a burst waits behind long prefill steps, on a healthy budget too.)
    if b.prompt_tokens <= 0 or (
        b.prompts_per_step >= t.budget_prompt_fit and b.load < t.budget_load
    ):
        return None
    return make_finding(
        "scheduling.prefill_token_budget",
        _L,
        bottleneck=ttft_missed(ev, t),
        severity=max(
            severity_above(share, t.queue_share, 0.95),
            severity_above(t.budget_prompt_fit / max(b.prompts_per_step, 1e-9), 1.0, 4.0),
            severity_above(b.load, t.budget_load, 1.0),
        ),
        explains=min(1.0, share + prefill),
        title=f"queueing is {share:.0%} and prefill {prefill:.0%} of TTFT with "
        f"{seats - b.num_decodes:.0f} of {seats:.0f} seats free: {said}; {_throughput_words(b)}",
        evidence=ev,
        used=(
            ("server.queue_time_mean_s", None),
            ("server.prefill_time_mean_s", None),
            ("config.max_num_seqs", None),
            ("kv.usage_max", t.kv_room),
            ("client.mean_prompt_tokens", b.left / t.budget_prompt_fit),
            ("server.steps_per_s", None),
        ),
        explanation=(
            "A step schedules its running decodes first and prompt chunks in what the token "
            "budget leaves; when that is less than a prompt, or the prompts arriving need most "
            "of it, each new request waits step after step for the prompts before it to be "
            "prefilled, with seats and KV cache to spare."
        ),
        next_steps=_budget_steps(
            ev, (ev.get("client.mean_prompt_tokens") or 0.0) + b.num_decodes, b.num_decodes
        ),
    )


def _throughput_words(b: _BudgetLoad) -> str:
    arriving = (
        f"prompts of {b.prompt_tokens:,.0f} tokens arrive at {b.arriving_tok_s:,.0f} tok/s "
        "to compute; "
        if b.arriving_tok_s is not None
        else f"prompts need {b.prompt_tokens:,.0f} tokens each; "
    )
    rate = "" if b.steps_per_s is None else f" at {b.steps_per_s:,.1f} steps/s"
    room = "" if b.prefill_tok_s is None else f" {b.prefill_tok_s:,.0f} tok/s ("
    close = "" if b.prefill_tok_s is None else ")"
    return (
        f"{arriving}the budget of {b.budget:,.0f} tokens/step{rate} leaves{room}"
        f"{b.left:,.0f} a step{close} for prefill after {b.num_decodes:.0f} decodes: "
        f"{b.prompts_per_step:.2f} prompts a step"
        + (f", {b.load:.0%} of it needed" if b.load > 0 else "")
    )


def _budget_steps(ev: Evidence, tokens: float, num_decodes: float = 0.0) -> tuple[str, ...]:
    """`tokens`: the least budget to ask for (a prompt and the decodes sharing its step)."""
    fits = " and the running decodes" if num_decodes > 0 else ""
    return (
        f"raise `{flag(ev, Knob.TOKEN_BUDGET)}`"
        + current(ev, "config.max_num_batched_tokens", "{:,.0f}")
        + f" to at least the typical prompt{fits} ({tokens:,.0f} tokens"
        + (
            ")"
            if engine_flag(ev, Knob.TOKEN_BUDGET)
            else "; SGLang: `--chunked-prefill-size`, TGI: `--max-batch-prefill-tokens`)"
        ),
        "if ITL must stay flat while prompts arrive, raise it in steps and watch ITL p95",
    )


@rule("scheduling.engine_loop_cpu", _L, ("proc.engine_thread_cpu",))
def engine_loop_cpu(ev: Evidence, t: Thresholds) -> Finding | None:
    busy = ev.get("proc.engine_thread_cpu") or 0.0
    if busy < t.engine_thread_busy:
        return None
    return make_finding(
        "scheduling.engine_loop_cpu",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity_above(busy, t.engine_thread_busy, 1.0),
        explains=0.6,
        title=f"the engine-core thread is {busy:.0%} busy on the CPU",
        evidence=ev,
        used=(("proc.engine_thread_cpu", t.engine_thread_busy),),
        explanation="Scheduling and bookkeeping in one Python thread set the pace of every step.",
        next_steps=(
            f"enable async scheduling; reduce `{flag(ev, Knob.MAX_SEATS)}`; use a faster host CPU",
        ),
    )


@rule("scheduling.step_cpu_gap", _L, ("trace.step_cpu_gap_fraction",))
def step_cpu_gap(ev: Evidence, t: Thresholds) -> Finding | None:
    share = ev.get("trace.step_cpu_gap_fraction") or 0.0
    if share < t.step_cpu_gap:
        return None
    return make_finding(
        "scheduling.step_cpu_gap",
        _L,
        bottleneck=slo_missed(ev, t),
        severity=severity_above(share, t.step_cpu_gap, 0.7),
        explains=share,
        title=f"{share:.0%} of each step is CPU time between forward passes",
        evidence=ev,
        used=(("trace.step_cpu_gap_fraction", t.step_cpu_gap),),
        explanation="The scheduler's own work is comparable with the forward pass it prepares.",
        next_steps=("enable async scheduling; lower the per-sequence scheduling cost",),
    )


def _queue_wait_s(ev: Evidence, waiting: float) -> float | None:
    """How long `waiting` requests take to serve at the measured level's request rate
    (output tokens/s over mean output tokens); None where the client measured no rate."""
    tok_s = ev.get("client.throughput_tok_s")
    out = ev.get("client.mean_output_tokens")
    if not tok_s or not out or tok_s <= 0 or out <= 0:
        return None
    return waiting * out / tok_s


@rule("scheduling.unbounded_queue", _L, ("queue.waiting_max",))
def unbounded_queue(ev: Evidence, t: Thresholds) -> Finding | None:
    slope = ev.get("queue.waiting_slope") or 0.0  # absent from one scrape: depth alone then
    waiting = ev.get("queue.waiting_max") or 0.0
    if slope < t.unbounded_slope and waiting < t.queued_for_minutes:
        return None
    wait_s = _queue_wait_s(ev, waiting)
    # A long queue is one that takes minutes to serve: a count alone where the rate is unknown
    # (a log, one scrape); a fast server drains thousands in seconds (at the measured level's
    # rate, no faster than it drains an overload: the wait is an upper bound)
    minutes = waiting >= t.queued_for_minutes and (wait_s is None or wait_s >= t.queued_for_s)
    drains = "" if wait_s is None else f", {wait_s:.0f} s at the measured rate"
    return make_finding(
        "scheduling.unbounded_queue",
        _L,
        bottleneck=minutes,
        severity=severity_above(waiting, 10, t.queued_for_minutes),
        explains=0.9 if minutes else 0.4,
        title=f"waiting requests grow without bound (up to {waiting:.0f}{drains}, +{slope:.1f}/s)",
        evidence=ev,
        used=(
            ("queue.waiting_slope", t.unbounded_slope),
            ("queue.waiting_max", t.queued_for_minutes),
        ),
        explanation=(
            "Arrivals exceed what the server finishes; with no admission limit requests queue "
            "for minutes instead of being rejected."
        ),
        next_steps=(
            "put an admission limit in front (gateway concurrency limit, 429 above a queue depth)",
            "add replicas; size them with `infertriage plan`",
        ),
    )
