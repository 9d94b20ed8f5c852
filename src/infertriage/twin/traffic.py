"""twin, level 2: the requests `simulate` sends, drawn from the `workload` library.

Takes a workload (any `--workload` spec `bench` takes, or the `--input-len` and
`--output-len` shorthands), the load's shape and a seed; gives a `Traffic`: the
workload's `RequestSpec`s (a `chat-mix` or `synthetic` workload's built on demand
from its drawn lengths, `workload.build.SyntheticSpecs`: a few bytes a request),
each request's arrival time and stage, and `Traffic.request(i)`, which builds
request i's prompt token ids only when it is asked for (when the request reaches
the front end), so a run never holds every prompt at once.

The load's shape is one of:
- one rate and a request count (`--rate`, `--num-requests`; 4 req/s and 1,000
  requests where not given): the one stage;
- back-to-back `Stage`s (`--stage RATE:DURATION`, repeatable): each stage's
  arrivals at its own rate over its own duration, the first at its start; the
  workload's sequence runs on across stages (request i is the workload's i-th,
  whichever stage it falls in);
- a trace's own timestamps (`trace:FILE`, `jsonl:FILE` with timestamps).
Arrivals are `workload.arrivals`' constant, Poisson or gamma (`gamma:SHAPE`,
shape below 1 burstier) offsets.

Without `--workload` the lengths pick it: `chat-mix` (the default synthetic chat mix:
prompts log-normal with median 512 and p90 2,048 tokens, capped at half of
`max_model_len`; outputs log-normal with median 256 and p90 1,024; 20 % of requests
opening with one shared 1,024-token system prefix inside their prompt length), with a
fixed `input_len` `synthetic:input=N` (no shared prefix, the chat mix's outputs unless
`output_len` is fixed too).

Token ids: each `SynthText` of a spec becomes `num_tokens` ids drawn from a generator
seeded by its key, and each literal message (ShareGPT, JSONL) ids drawn from one seeded
by the CRC-32 of its text, as many as `workload.estimate_tokens` counts (the last
message takes what is left of the spec's `prompt_tokens`): equal text gives equal ids,
so a shared prefix, and a cycled prompt set's whole prompt, hit the prefix cache.
Outputs are capped at what the context leaves after the prompt.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from infertriage.schemas import UserError, parse_duration
from infertriage.workload import (
    CHAT_MIX_OUTPUT,
    ArrivalKind,
    Arrivals,
    RequestSpec,
    SynthText,
    WorkloadKind,
    WorkloadSpec,
    estimate_tokens,
    make_offsets,
    make_schedule,
    make_specs,
    parse_arrivals,
    parse_workload,
    read_jsonl_requests,
)
from infertriage.workload.build import synthetic_specs

__all__ = [
    "DEFAULT_NUM_REQUESTS",
    "DEFAULT_RATE",
    "ArrivalProcess",
    "Stage",
    "Traffic",
    "TrafficRequest",
    "make_traffic",
    "parse_arrival_process",
    "parse_stage",
    "plan_traffic",
    "prompt_token_ids",
    "resolve_workload",
    "traffic_workload",
]

ArrivalProcess = str  # "poisson", "constant" or "gamma:SHAPE"
# One rate and a count, where neither stages nor a trace shape the load and none is given.
DEFAULT_RATE = 4.0
DEFAULT_NUM_REQUESTS = 1000
_SIMULATED_ARRIVALS = (ArrivalKind.POISSON, ArrivalKind.CONSTANT, ArrivalKind.GAMMA)
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_LITERAL_TAG = 1 << 48  # keeps a literal text's seed apart from every SynthText key


@dataclass(frozen=True, slots=True)
class Stage:
    """One stretch of the load: arrivals at `rate` requests/s for `duration_s` seconds."""

    rate: float
    duration_s: float


@dataclass(frozen=True, slots=True)
class TrafficRequest:
    request_id: str
    arrival_ts: float
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    shares_prefix: bool = False


def parse_stage(text: str) -> Stage:
    """`--stage RATE:DURATION`: `8:600`, `20:10m`, `0.5:90s` (as every time flag reads it)."""
    rate_text, sep, duration_text = text.strip().partition(":")
    if not sep:
        raise UserError(f"--stage {text!r} is not RATE:DURATION (e.g. 8:600 or 8:10m).")
    try:
        rate = float(rate_text)
    except ValueError:
        rate = math.nan
    if not (rate > 0 and math.isfinite(rate)):
        raise UserError(f"--stage {text!r}: the rate {rate_text!r} is not a positive number.")
    try:
        duration_s = parse_duration(duration_text)
    except UserError:
        duration_s = math.nan
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise UserError(
            f"--stage {text!r}: {duration_text!r} is not a positive duration (600, 600s, 10m)."
        )
    return Stage(rate, duration_s)


def parse_arrival_process(text: str) -> Arrivals:
    """`--arrivals`: poisson, constant or gamma:SHAPE, as `Arrivals` at 1 req/s (a template)."""
    try:
        arrivals = parse_arrivals(text, 1.0)
    except UserError:
        arrivals = None
    if arrivals is None or arrivals.kind not in _SIMULATED_ARRIVALS:
        raise UserError(
            f"--arrivals must be poisson, constant or gamma:SHAPE (SHAPE above 0), not {text!r}."
        )
    return arrivals


def traffic_workload(input_len: int | None, output_len: int | None) -> WorkloadSpec:
    """The workload `simulate`'s length options name: the chat mix, or fixed lengths."""
    if input_len is None:
        return parse_workload("chat-mix" if output_len is None else f"chat-mix:output={output_len}")
    output = CHAT_MIX_OUTPUT if output_len is None else str(output_len)
    return parse_workload(f"synthetic:input={input_len},output={output}")


def resolve_workload(
    workload: str | None, input_len: int | None, output_len: int | None
) -> WorkloadSpec:
    """`--workload`, or the workload the length shorthands name; never both."""
    if workload is None:
        return traffic_workload(input_len, output_len)
    if input_len is not None or output_len is not None:
        raise UserError(
            "give --workload or --input-len/--output-len, not both (e.g. "
            "--workload synthetic:input=512,output=128)."
        )
    return parse_workload(workload)


# --- token ids --------------------------------------------------------------------------------


def _ids(seed: int, count: int, vocab_size: int) -> list[int]:
    rng = np.random.default_rng(seed & _MASK64)
    return rng.integers(0, vocab_size, count).tolist()  # type: ignore[no-any-return]


def prompt_token_ids(spec: RequestSpec, vocab_size: int) -> tuple[int, ...]:
    """The prompt of `spec` as token ids: equal text always gives equal ids."""
    literal = [i for i, turn in enumerate(spec.turns) if isinstance(turn.content, str)]
    synth_total = sum(t.content.num_tokens for t in spec.turns if isinstance(t.content, SynthText))
    ids: list[int] = []
    literal_so_far = 0
    for i, turn in enumerate(spec.turns):
        content = turn.content
        if isinstance(content, SynthText):
            ids.extend(_ids(content.key, content.num_tokens, vocab_size))
            continue
        count = max(1, estimate_tokens(content))
        if i == literal[-1]:  # the last message takes what the spec's count leaves
            count = max(1, spec.prompt_tokens - synth_total - literal_so_far)
        literal_so_far += count
        seed = _LITERAL_TAG | zlib.crc32(content.encode("utf-8"))
        ids.extend(_ids(seed, count, vocab_size))
    return tuple(ids)


# --- the schedule -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Traffic:
    """The run's requests: specs, arrivals and stages; prompts built one at a time."""

    specs: Sequence[RequestSpec]  # a synthetic workload's built on demand (`SyntheticSpecs`)
    arrival_ts: npt.NDArray[np.float64]
    stage_of: npt.NDArray[np.int64]  # the stage each request arrives in
    stages: tuple[Stage, ...]
    stage_start_ts: tuple[float, ...]
    max_model_len: int
    vocab_size: int

    def __len__(self) -> int:
        return len(self.specs)

    def request(self, index: int) -> TrafficRequest:
        """Request `index` with its prompt token ids (built now, not kept)."""
        spec = self.specs[index]
        tokens = prompt_token_ids(spec, self.vocab_size)
        room = max(1, self.max_model_len - len(tokens))
        return TrafficRequest(
            request_id=f"sim-{spec.index}",
            arrival_ts=float(self.arrival_ts[index]),
            prompt_token_ids=tokens,
            max_tokens=min(spec.max_tokens, room),
            shares_prefix=("prefix", "shared") in spec.labels,
        )

    def stage_counts(self) -> list[int]:
        """Requests arriving in each stage."""
        counts = np.bincount(self.stage_of, minlength=len(self.stages))
        return [int(c) for c in counts]


def _replays(ws: WorkloadSpec) -> bool:
    """The workload carries its own arrival times (a trace, a timed JSONL with replay)."""
    if not ws.is_replay:
        return False
    if ws.kind is WorkloadKind.TRACE:
        return True
    assert ws.path is not None
    return read_jsonl_requests(ws.path)[0].timestamp_s is not None


def _staged_offsets(
    stages: Sequence[Stage], arrivals: Arrivals, seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], tuple[float, ...]]:
    """Each stage's arrivals at its rate from its start; stage k's seed is `seed + k`."""
    offsets: list[npt.NDArray[np.float64]] = []
    owners: list[npt.NDArray[np.int64]] = []
    starts: list[float] = []
    start = 0.0
    for k, stage in enumerate(stages):
        if not (stage.rate > 0 and stage.duration_s > 0):
            raise UserError(f"a stage needs a positive rate and duration, not {stage}.")
        at_rate = dataclasses.replace(arrivals, rate=stage.rate)
        part = make_offsets(at_rate, duration_s=stage.duration_s, seed=seed + k)
        offsets.append(part + start)
        owners.append(np.full(len(part), k, dtype=np.int64))
        starts.append(start)
        start += stage.duration_s
    return np.concatenate(offsets), np.concatenate(owners), tuple(starts)


@dataclass(frozen=True, slots=True, eq=False)
class _Shape:
    """Which requests arrive when, and in which stage."""

    specs: Sequence[RequestSpec]
    arrival_ts: npt.NDArray[np.float64]
    stage_of: npt.NDArray[np.int64]
    stages: tuple[Stage, ...]
    stage_start_ts: tuple[float, ...] = (0.0,)


def _replayed(ws: WorkloadSpec, num_requests: int | None, seed: int, max_model_len: int) -> _Shape:
    """A trace as one stage: its span, and its mean rate over it."""
    schedule = make_schedule(
        ws,
        None,
        num_requests=num_requests,
        duration_s=None,
        seed=seed,
        max_model_len=max_model_len,
    )
    offsets = schedule.offsets_s
    assert offsets is not None
    span = float(offsets[-1] - offsets[0]) if len(offsets) > 1 else 0.0
    stage = Stage(rate=(len(offsets) - 1) / span if span > 0 else 0.0, duration_s=span)
    return _Shape(schedule.specs, offsets, np.zeros(len(offsets), np.int64), (stage,))


def _specs(ws: WorkloadSpec, count: int, seed: int, max_model_len: int) -> Sequence[RequestSpec]:
    """`make_specs`'s requests; a synthetic workload's built on demand (the same ones)."""
    lazy = synthetic_specs(ws, count, seed=seed, max_model_len=max_model_len)
    if lazy is not None:
        return lazy
    return make_specs(ws, count, seed=seed, max_model_len=max_model_len)


def _one_rate(
    ws: WorkloadSpec, arrivals: Arrivals, num_requests: int, seed: int, max_model_len: int
) -> _Shape:
    stage = Stage(arrivals.rate, num_requests / arrivals.rate)
    if ws.kind in (WorkloadKind.CHAT_MIX, WorkloadKind.SYNTHETIC):  # `make_schedule`'s draws
        offsets = make_offsets(arrivals, num_requests=num_requests, duration_s=None, seed=seed)
        specs = _specs(ws, len(offsets), seed, max_model_len)
        return _Shape(specs, offsets, np.zeros(len(offsets), np.int64), (stage,))
    schedule = make_schedule(
        ws,
        arrivals,
        num_requests=num_requests,
        duration_s=None,
        seed=seed,
        max_model_len=max_model_len,
    )
    assert schedule.offsets_s is not None  # an open loop
    drawn = schedule.offsets_s
    return _Shape(schedule.specs, drawn, np.zeros(len(drawn), np.int64), (stage,))


def _staged(
    ws: WorkloadSpec, stages: Sequence[Stage], arrivals: Arrivals, seed: int, max_model_len: int
) -> _Shape:
    offsets, owners, starts = _staged_offsets(stages, arrivals, seed)
    if len(offsets) == 0:
        raise UserError("the stages leave no request to send.")
    specs = _specs(ws, len(offsets), seed, max_model_len)
    return _Shape(specs, offsets, owners, tuple(stages), starts)


def plan_traffic(
    ws: WorkloadSpec,
    *,
    max_model_len: int,
    vocab_size: int,
    rate: float | None = None,
    num_requests: int | None = None,
    stages: Sequence[Stage] | None = None,
    arrivals: ArrivalProcess = "poisson",
    seed: int = 0,
) -> Traffic:
    """The run's `Traffic`: one rate and a count, back-to-back stages, or a trace's times."""
    process = parse_arrival_process(arrivals)
    if _replays(ws):
        if rate is not None or stages:
            raise UserError("a trace replays its own timestamps: drop --rate and --stage.")
        shape = _replayed(ws, num_requests, seed, max_model_len)
    elif stages:
        if rate is not None or num_requests is not None:
            raise UserError("give --stage or --rate/--num-requests, not both.")
        shape = _staged(ws, stages, process, seed, max_model_len)
    else:
        rate = DEFAULT_RATE if rate is None else rate
        num_requests = DEFAULT_NUM_REQUESTS if num_requests is None else num_requests
        if not (rate > 0 and math.isfinite(rate)) or num_requests < 1:
            raise UserError("the rate must be positive and --num-requests at least 1.")
        at_rate = dataclasses.replace(process, rate=rate)
        shape = _one_rate(ws, at_rate, num_requests, seed, max_model_len)
    return Traffic(
        shape.specs,
        shape.arrival_ts,
        shape.stage_of,
        shape.stages,
        shape.stage_start_ts,
        max_model_len,
        vocab_size,
    )


def make_traffic(
    *,
    rate: float,
    num_requests: int,
    max_model_len: int,
    vocab_size: int,
    input_len: int | None = None,
    output_len: int | None = None,
    arrivals: ArrivalProcess = "poisson",
    seed: int = 0,
) -> list[TrafficRequest]:
    """`num_requests` requests at `rate` req/s, prompts built; lengths fixed where given,
    else the chat mix (for a real-time replay of what `simulate` sends)."""
    if rate <= 0 or num_requests < 1:
        raise ValueError("rate must be positive and num_requests at least 1")
    traffic = plan_traffic(
        traffic_workload(input_len, output_len),
        max_model_len=max_model_len,
        vocab_size=vocab_size,
        rate=rate,
        num_requests=num_requests,
        arrivals=arrivals,
        seed=seed,
    )
    return [traffic.request(i) for i in range(len(traffic))]
