"""workload, level 1: `--workload SPEC` → a seed-deterministic `Schedule`.

Takes a workload spec string, an arrival process (or none, for a closed
loop), a bound and a seed; gives the schedule every load generator worker
shares. Specs are `KIND[:ARG][,key=value…]`:

- `chat-mix` (default): the synthetic chat mix of docs/architecture.md — prompts log-normal
  with median 512 and p90 2,048 tokens, capped at half of `max_model_len`;
  outputs log-normal with median 256 and p90 1,024; 20 % of requests open with
  one shared 1,024-token system prefix, drawn from the prompts long enough to
  hold it, so the prompt-length distribution stays as stated.
- `synthetic:input=DIST,output=DIST[,prefix=N,prefix_share=F]` — lengths as
  `lengths.parse_length` reads them; `input=512,output=128` is exact targets;
  a `prefix` (shared by `prefix_share` of requests, all by default) is added
  before the input.
- `prefix:groups=G,prefix=N,input=DIST,output=DIST` — G groups, each with its
  own N-token prefix, for prefix-cache diagnosis: each request draws its group
  and its own question (`input` tokens after the prefix).
- `prefix:groups=G,prompts=P,prefix=N,input=DIST,output=DIST` — a cycled
  prompt set: exactly G×P fixed requests (each group's own N-token prefix and,
  per prompt, a fixed question of `input` tokens and a fixed `output`),
  shuffled once with the seed; request i sends prompt i mod (G×P), so after the
  first cycle a server's prefix cache holds whole prompts. This is what
  kubernetes-sigs/inference-perf's `shared_prefix` data generator
  (`num_groups`, `num_prompts_per_group`, `system_prompt_len`, `question_len`,
  `output_len`) and SGLang's `generated-shared-prefix` dataset send.
- `multiturn:turns=T,input=DIST,output=DIST[,parallel=P,system=N]` —
  conversations carrying their history (earlier user turns and replies of the
  lengths asked); P conversations interleave, so turn k+1 of a conversation is
  sent P requests after turn k.
- `agentic:turns=DIST,input=DIST,output=DIST,system=N,tools=N,think=DELAY,
  tool_share=F,tool_result=DIST,tool_latency=DELAY,fanout=K,fanout_share=F` —
  agent sessions (`agentic`): each request is the whole history so far plus its
  new message, opened by one system prompt + tool definitions (`system` + `tools`
  tokens) that every session shares; turns after `think` seconds, tool results
  after `tool_latency`, fan-out children sent together. A session's next step is
  sent once its previous one is answered: in an open loop a session starts at its
  first request's arrival, in a closed loop each user runs one session at a time.
- `sharegpt:FILE`, `jsonl:FILE` (timestamps, when present, replay), and
  `trace:FILE[,speed=S]` (replay at S× speed).

Lengths are as asked (an output is clipped at `max_model_len`, a chat-mix
prompt at half of it); `fit` fits each request to a server's context.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import overload

import numpy as np
import numpy.typing as npt

from infertriage.schemas import UserError
from infertriage.workload.agentic import AgenticShape, DelayDist, build_sessions, parse_delay
from infertriage.workload.arrivals import Arrivals, make_offsets
from infertriage.workload.lengths import LengthDist, parse_length
from infertriage.workload.sources import DatasetItem, read_jsonl_requests, read_sharegpt
from infertriage.workload.spec import RequestSpec, Schedule, Session, SynthText, Turn
from infertriage.workload.text import TokenCounter

__all__ = [
    "CHAT_MIX_OUTPUT",
    "CHAT_MIX_PROMPT",
    "DEFAULT_WORKLOAD",
    "SyntheticSpecs",
    "WorkloadKind",
    "WorkloadSpec",
    "closed_loop_count",
    "make_schedule",
    "make_specs",
    "parse_workload",
    "synthetic_specs",
]

DEFAULT_WORKLOAD = "chat-mix"
# the chat mix: prompt and output lengths (median, p90), as `lengths.parse_length` reads them.
CHAT_MIX_PROMPT = "lognormal(512,2048)"
CHAT_MIX_OUTPUT = "lognormal(256,1024)"
DEFAULT_MAX_MODEL_LEN = 8192
# A closed loop bounded only by time gets this many requests per slot per second at most:
# enough for requests as short as 10 ms, small enough to build in a blink.
_CLOSED_LOOP_PER_SLOT_S = 100
_CLOSED_LOOP_MAX = 200_000
# Keys of synthetic text: distinct ranges keep prefixes, bodies and turns from ever colliding.
_PREFIX_KEY = 1 << 40
_BODY_KEY = 1 << 41
# A request that opens with the shared prefix still asks something of its own.
_MIN_BODY = 16
_SPLIT = re.compile(r",(?![^()]*\))")


class WorkloadKind(StrEnum):
    CHAT_MIX = "chat-mix"
    SYNTHETIC = "synthetic"
    PREFIX = "prefix"
    MULTITURN = "multiturn"
    AGENTIC = "agentic"
    SHAREGPT = "sharegpt"
    JSONL = "jsonl"
    TRACE = "trace"


_FILE_KINDS = {WorkloadKind.SHAREGPT, WorkloadKind.JSONL, WorkloadKind.TRACE}
_KEYS: dict[WorkloadKind, set[str]] = {
    WorkloadKind.CHAT_MIX: {"prefix", "prefix_share", "output", "ignore_eos"},
    WorkloadKind.SYNTHETIC: {"input", "output", "prefix", "prefix_share", "ignore_eos"},
    WorkloadKind.PREFIX: {"groups", "prompts", "prefix", "input", "output", "ignore_eos"},
    WorkloadKind.MULTITURN: {"turns", "input", "output", "parallel", "system", "ignore_eos"},
    WorkloadKind.AGENTIC: {
        "turns",
        "input",
        "output",
        "system",
        "tools",
        "think",
        "tool_share",
        "tool_result",
        "tool_latency",
        "fanout",
        "fanout_share",
        "ignore_eos",
    },
    WorkloadKind.SHAREGPT: {"output", "max_output", "ignore_eos"},
    WorkloadKind.JSONL: {"ignore_eos", "replay"},
    WorkloadKind.TRACE: {"speed", "ignore_eos"},
}


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A parsed `--workload`: its kind, file (for file kinds) and options."""

    kind: WorkloadKind
    path: Path | None
    options: tuple[tuple[str, str], ...]
    text: str

    def option(self, key: str, default: str) -> str:
        return dict(self.options).get(key, default)

    def length(self, key: str, default: str) -> LengthDist:
        return parse_length(self.option(key, default))

    def number(self, key: str, default: float) -> float:
        raw = self.option(key, "")
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not 0 <= value < math.inf:  # every option is a count, a length or a share
            raise UserError(
                f"--workload {self.text!r}: {key}={raw!r} is not a number of 0 or more."
            )
        return value

    def flag(self, key: str, default: bool) -> bool:
        raw = self.option(key, "").lower()
        if not raw:
            return default
        if raw not in {"true", "false", "1", "0", "yes", "no"}:
            raise UserError(f"--workload {self.text!r}: {key}={raw!r} is not true or false.")
        return raw in {"true", "1", "yes"}

    @property
    def is_replay(self) -> bool:
        return self.kind is WorkloadKind.TRACE or (
            self.kind is WorkloadKind.JSONL and self.flag("replay", True)
        )


def parse_workload(text: str) -> WorkloadSpec:
    head, _, rest = text.strip().partition(":")
    try:
        kind = WorkloadKind(head.strip().lower())
    except ValueError:
        known = ", ".join(k.value for k in WorkloadKind)
        raise UserError(f"unknown workload {head!r} (use one of {known}).") from None
    parts = [part.strip() for part in _SPLIT.split(rest)] if rest else []
    path: Path | None = None
    if kind in _FILE_KINDS:
        if not parts or "=" in parts[0] or not parts[0]:
            raise UserError(f"--workload {kind}:FILE needs a file.")
        path = Path(parts.pop(0))
    options: list[tuple[str, str]] = []
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep:
            raise UserError(f"--workload {text!r}: {part!r} is not key=value.")
        if key.strip() not in _KEYS[kind]:
            known = ", ".join(sorted(_KEYS[kind]))
            raise UserError(f"--workload {kind} has no option {key.strip()!r} (known: {known}).")
        options.append((key.strip(), value.strip()))
    spec = WorkloadSpec(kind, path, tuple(options), text)
    if kind is WorkloadKind.AGENTIC:
        agentic_shape(spec)  # a bad option is refused now, before anything starts
    return spec


@dataclass(frozen=True, slots=True)
class _Ctx:
    rng: np.random.Generator
    count: int
    max_model_len: int
    ignore_eos: bool
    tokenizer: TokenCounter | None


def _pick_shared(
    rng: np.random.Generator, prompts: npt.NDArray[np.int64], share: float, room: int
) -> npt.NDArray[np.bool_]:
    """Which requests open with the shared prefix: `share` of them, drawn from those with room."""
    n = len(prompts)
    want = round(share * n)
    shared = np.zeros(n, dtype=bool)
    if want <= 0:
        return shared
    eligible = np.flatnonzero(prompts >= room)
    if len(eligible) >= want:
        shared[rng.choice(eligible, want, replace=False)] = True
        return shared
    # Too few long prompts: take them all and lengthen random others to hold the prefix.
    others = np.flatnonzero(prompts < room)
    shared[eligible] = True
    shared[rng.choice(others, want - len(eligible), replace=False)] = True
    return shared


class SyntheticSpecs(Sequence[RequestSpec]):
    """A synthetic workload's requests, each `RequestSpec` built when it is asked for from
    the drawn lengths (17 bytes a request), so a long run never holds them all. A prefix
    `inside` the prompt length keeps the length distribution; else it is added."""

    __slots__ = ("_ignore_eos", "_inside", "_outputs", "_prefix", "_prompts", "_shared")

    def __init__(
        self,
        prompts: npt.NDArray[np.int64],
        outputs: npt.NDArray[np.int64],
        shared: npt.NDArray[np.bool_],
        prefix_len: int,
        *,
        inside: bool,
        ignore_eos: bool,
    ) -> None:
        self._prompts, self._outputs, self._shared = prompts, outputs, shared
        self._prefix = SynthText(prefix_len, _PREFIX_KEY)
        self._inside, self._ignore_eos = inside, ignore_eos

    def __len__(self) -> int:
        return len(self._prompts)

    @overload
    def __getitem__(self, index: int) -> RequestSpec: ...
    @overload
    def __getitem__(self, index: slice) -> list[RequestSpec]: ...
    def __getitem__(self, index: int | slice) -> RequestSpec | list[RequestSpec]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = index + len(self) if index < 0 else index
        if not 0 <= i < len(self):
            raise IndexError(index)
        return self._spec(i, int(self._prompts[i]), int(self._outputs[i]), bool(self._shared[i]))

    def __iter__(self) -> Iterator[RequestSpec]:
        rows = zip(
            self._prompts.tolist(), self._outputs.tolist(), self._shared.tolist(), strict=True
        )
        for i, (length, out, has_prefix) in enumerate(rows):
            yield self._spec(i, length, out, has_prefix)

    def _spec(self, i: int, length: int, out: int, has_prefix: bool) -> RequestSpec:
        if has_prefix:
            prefix = self._prefix
            body_len = max(_MIN_BODY, length - prefix.num_tokens) if self._inside else length
            body = SynthText(body_len, _BODY_KEY + i)
            turns: tuple[Turn, ...] = (Turn("system", prefix), Turn("user", body))
            labels: tuple[tuple[str, str], ...] = (("prefix", "shared"),)
            total = prefix.num_tokens + body_len
        else:
            turns, total, labels = (Turn("user", SynthText(length, _BODY_KEY + i)),), length, ()
        return RequestSpec(i, turns, total, out, self._ignore_eos, labels)


def _chat_mix(ws: WorkloadSpec, ctx: _Ctx) -> SyntheticSpecs:
    cap = max(2, ctx.max_model_len // 2)
    prompts = parse_length(CHAT_MIX_PROMPT).sample(ctx.rng, ctx.count, cap=cap)
    outputs = ws.length("output", CHAT_MIX_OUTPUT).sample(ctx.rng, ctx.count, cap=ctx.max_model_len)
    prefix_len = min(round(ws.number("prefix", 1024)), cap // 2)
    share = ws.number("prefix_share", 0.2) if prefix_len > 0 else 0.0
    shared = _pick_shared(ctx.rng, prompts, share, prefix_len + _MIN_BODY)
    return SyntheticSpecs(
        prompts, outputs, shared, prefix_len, inside=True, ignore_eos=ctx.ignore_eos
    )


def _plain_synthetic(ws: WorkloadSpec, ctx: _Ctx) -> SyntheticSpecs:
    prompts = ws.length("input", "512").sample(ctx.rng, ctx.count)
    outputs = ws.length("output", "256").sample(ctx.rng, ctx.count, cap=ctx.max_model_len)
    prefix_len = round(ws.number("prefix", 0))
    share = ws.number("prefix_share", 1.0) if prefix_len > 0 else 0.0
    shared = ctx.rng.random(ctx.count) < share
    return SyntheticSpecs(
        prompts, outputs, shared, prefix_len, inside=False, ignore_eos=ctx.ignore_eos
    )


def _prompt_set(ws: WorkloadSpec, ctx: _Ctx, num_groups: int, prefix_len: int) -> list[RequestSpec]:
    """G×P fixed prompts, shuffled once, sent in turn (inference-perf's `shared_prefix`)."""
    per_group = max(1, round(ws.number("prompts", 1)))
    size = num_groups * per_group
    questions = ws.length("input", "256").sample(ctx.rng, size).tolist()
    outputs = ws.length("output", "128").sample(ctx.rng, size, cap=ctx.max_model_len).tolist()
    prompts = []
    for prompt in ctx.rng.permutation(size).tolist():
        group = prompt // per_group
        body = SynthText(int(questions[prompt]), _BODY_KEY + prompt)
        turns = (Turn("system", SynthText(prefix_len, _PREFIX_KEY + group)), Turn("user", body))
        labels = (("group", str(group)), ("prompt", str(prompt)))
        prompts.append((turns, prefix_len + body.num_tokens, int(outputs[prompt]), labels))
    return [  # the G×P prompts' messages are shared, not copied per request
        RequestSpec(i, turns, total, out, ctx.ignore_eos, labels)
        for i, (turns, total, out, labels) in ((i, prompts[i % size]) for i in range(ctx.count))
    ]


def _prefix_groups(ws: WorkloadSpec, ctx: _Ctx) -> list[RequestSpec]:
    num_groups = max(1, round(ws.number("groups", 8)))
    prefix_len = max(1, round(ws.number("prefix", 1024)))
    if "prompts" in dict(ws.options):
        return _prompt_set(ws, ctx, num_groups, prefix_len)
    suffixes = ws.length("input", "256").sample(ctx.rng, ctx.count)
    outputs = ws.length("output", "128").sample(ctx.rng, ctx.count, cap=ctx.max_model_len)
    groups = ctx.rng.integers(0, num_groups, ctx.count)
    specs = []
    for i in range(ctx.count):
        group = int(groups[i])
        prefix = SynthText(prefix_len, _PREFIX_KEY + group)
        body = SynthText(int(suffixes[i]), _BODY_KEY + i)
        total = prefix_len + body.num_tokens
        turns = (Turn("system", prefix), Turn("user", body))
        labels = (("group", str(group)),)
        specs.append(RequestSpec(i, turns, total, int(outputs[i]), ctx.ignore_eos, labels))
    return specs


def _multiturn(ws: WorkloadSpec, ctx: _Ctx) -> list[RequestSpec]:
    num_turns = max(1, round(ws.number("turns", 4)))
    parallel = max(1, round(ws.number("parallel", 16)))
    system_len = round(ws.number("system", 0))
    num_convs = math.ceil(ctx.count / num_turns)
    users = ws.length("input", "128").sample(ctx.rng, num_convs * num_turns)
    replies = ws.length("output", "128").sample(ctx.rng, num_convs * num_turns)
    specs: list[RequestSpec] = []
    for block in range(0, num_convs, parallel):
        for turn in range(num_turns):
            for conv in range(block, min(block + parallel, num_convs)):
                if len(specs) == ctx.count:
                    return specs
                history: list[Turn] = []
                if system_len > 0:
                    history.append(Turn("system", SynthText(system_len, _PREFIX_KEY + conv)))
                for k in range(turn + 1):
                    j = conv * num_turns + k
                    history.append(Turn("user", SynthText(int(users[j]), _BODY_KEY + 2 * j)))
                    if k < turn:
                        reply = SynthText(int(replies[j]), _BODY_KEY + 2 * j + 1)
                        history.append(Turn("assistant", reply))
                total = sum(
                    t.content.num_tokens for t in history if isinstance(t.content, SynthText)
                )
                out = int(replies[conv * num_turns + turn])
                labels = (("conversation", str(conv)), ("turn", str(turn)))
                specs.append(
                    RequestSpec(len(specs), tuple(history), total, out, ctx.ignore_eos, labels)
                )
    return specs


def _share(ws: WorkloadSpec, key: str, default: float) -> float:
    value = ws.number(key, default)
    if value > 1:
        raise UserError(
            f"--workload {ws.text!r}: {key}={value:g} is a share of turns, not above 1."
        )
    return value


def _agentic_length(ws: WorkloadSpec, key: str, default: str) -> LengthDist:
    try:
        return ws.length(key, default)
    except UserError as err:
        raise UserError(f"--workload {ws.text!r}: {key}: {err}") from None


def _agentic_delay(ws: WorkloadSpec, key: str, default: str) -> DelayDist:
    try:
        return parse_delay(ws.option(key, default), key)
    except UserError as err:
        raise UserError(f"--workload {ws.text!r}: {err}") from None


def agentic_shape(ws: WorkloadSpec, *, ignore_eos: bool = True) -> AgenticShape:
    """The options of an `agentic:` workload, parsed (each refused in one sentence)."""
    fanout = round(ws.number("fanout", 0))
    fanout_share = _share(ws, "fanout_share", 0.25) if fanout > 0 else 0.0
    tool_share = _share(ws, "tool_share", 0.5)
    if tool_share + fanout_share > 1:
        raise UserError(
            f"--workload {ws.text!r}: tool_share {tool_share:g} + fanout_share "
            f"{fanout_share:g} is more than 1 (each is a share of turns; tool_share is 0.5 "
            "unless given)."
        )
    return AgenticShape(
        turns=_agentic_length(ws, "turns", "6"),
        user=_agentic_length(ws, "input", "128"),
        output=_agentic_length(ws, "output", "128"),
        shared_tokens=round(ws.number("system", 1024)) + round(ws.number("tools", 1024)),
        think=_agentic_delay(ws, "think", "lognormal(0.5,2)"),
        tool_share=tool_share,
        tool_result=_agentic_length(ws, "tool_result", "lognormal(256,1024)"),
        tool_latency=_agentic_delay(ws, "tool_latency", "lognormal(0.2,1)"),
        fanout=fanout,
        fanout_share=fanout_share,
        ignore_eos=ignore_eos,
    )


def _agentic(ws: WorkloadSpec, ctx: _Ctx) -> tuple[list[RequestSpec], tuple[Session, ...]]:
    return build_sessions(agentic_shape(ws, ignore_eos=ctx.ignore_eos), ctx.rng, ctx.count)


def _dataset_items(ws: WorkloadSpec, tokenizer: TokenCounter | None) -> list[DatasetItem]:
    assert ws.path is not None
    if ws.kind is WorkloadKind.SHAREGPT:
        return read_sharegpt(ws.path, tokenizer)
    items = read_jsonl_requests(ws.path, tokenizer, key_base=_BODY_KEY)
    if ws.kind is WorkloadKind.TRACE and items[0].timestamp_s is None:
        raise UserError(f"{ws.path}: a trace needs a `timestamp` on every line.")
    return items


def _from_items(ws: WorkloadSpec, ctx: _Ctx, items: list[DatasetItem]) -> list[RequestSpec]:
    order = np.arange(len(items))
    if ws.kind is WorkloadKind.SHAREGPT:
        ctx.rng.shuffle(order)
    override = ws.length("output", "1") if "output" in dict(ws.options) else None
    overrides = override.sample(ctx.rng, ctx.count) if override is not None else None
    max_output = round(ws.number("max_output", ctx.max_model_len))
    specs = []
    for i in range(ctx.count):
        item = items[int(order[i % len(order)])]
        out = int(overrides[i]) if overrides is not None else item.output_tokens
        specs.append(
            RequestSpec(i, item.turns, item.prompt_tokens, min(out, max_output), ctx.ignore_eos)
        )
    return specs


_BUILDERS: dict[WorkloadKind, Callable[[WorkloadSpec, _Ctx], Sequence[RequestSpec]]] = {
    WorkloadKind.CHAT_MIX: _chat_mix,
    WorkloadKind.SYNTHETIC: _plain_synthetic,
    WorkloadKind.PREFIX: _prefix_groups,
    WorkloadKind.MULTITURN: _multiturn,
}


def make_specs(
    ws: WorkloadSpec,
    count: int,
    *,
    seed: int = 0,
    max_model_len: int = DEFAULT_MAX_MODEL_LEN,
    tokenizer: TokenCounter | None = None,
    items: list[DatasetItem] | None = None,
) -> tuple[RequestSpec, ...]:
    """`count` requests of the workload; datasets are cycled (ShareGPT shuffled, seeded).

    Lengths are the workload's, as asked: `fit.fit_specs` fits them to a server's context.
    """
    ctx = _Ctx(
        np.random.default_rng(seed), count, max_model_len, ws.flag("ignore_eos", True), tokenizer
    )
    if ws.kind is WorkloadKind.AGENTIC:
        return tuple(_agentic(ws, ctx)[0])
    builder = _BUILDERS.get(ws.kind)
    if builder is not None:
        return tuple(builder(ws, ctx))
    return tuple(
        _from_items(ws, ctx, items if items is not None else _dataset_items(ws, tokenizer))
    )


def synthetic_specs(
    ws: WorkloadSpec, count: int, *, seed: int = 0, max_model_len: int = DEFAULT_MAX_MODEL_LEN
) -> SyntheticSpecs | None:
    """What `make_specs` gives for a `chat-mix` or `synthetic` workload, the same requests
    with the same seed, as a `SyntheticSpecs` built on demand; None for any other kind."""
    if ws.kind not in (WorkloadKind.CHAT_MIX, WorkloadKind.SYNTHETIC):
        return None
    ctx = _Ctx(np.random.default_rng(seed), count, max_model_len, ws.flag("ignore_eos", True), None)
    return _chat_mix(ws, ctx) if ws.kind is WorkloadKind.CHAT_MIX else _plain_synthetic(ws, ctx)


def closed_loop_count(concurrency: int, duration_s: float | None, num_requests: int | None) -> int:
    """How many requests a closed loop gets: the asked number, or enough for the duration."""
    if num_requests is not None:
        return num_requests
    if duration_s is None:
        raise UserError("give --num-requests or --duration to bound the run.")
    per_slot = max(64, math.ceil(duration_s * _CLOSED_LOOP_PER_SLOT_S))
    return min(_CLOSED_LOOP_MAX, concurrency * per_slot)


def _replay_offsets(
    ws: WorkloadSpec, items: list[DatasetItem], num_requests: int | None, duration_s: float | None
) -> npt.NDArray[np.float64]:
    speed = ws.number("speed", 1.0)
    if speed <= 0:
        raise UserError(f"--workload {ws.text!r}: speed must be positive.")
    stamps = np.asarray([item.timestamp_s for item in items], dtype=np.float64)
    if np.any(np.diff(stamps) < 0):
        raise UserError(f"{ws.path}: trace timestamps must not go backwards.")
    offsets = (stamps - stamps[0]) / speed
    if duration_s is not None:
        offsets = offsets[offsets < duration_s]
    if num_requests is not None:
        offsets = offsets[:num_requests]
    return np.asarray(offsets, dtype=np.float64)


def make_schedule(
    ws: WorkloadSpec,
    arrivals: Arrivals | None,
    *,
    num_requests: int | None,
    duration_s: float | None,
    concurrency: int = 1,
    seed: int = 0,
    max_model_len: int = DEFAULT_MAX_MODEL_LEN,
    tokenizer: TokenCounter | None = None,
) -> Schedule:
    """The run's schedule: offsets from `arrivals` (open loop), the trace, or none (closed)."""
    items = None
    if ws.kind in _FILE_KINDS:
        items = _dataset_items(ws, tokenizer)
    offsets: npt.NDArray[np.float64] | None
    if items is not None and ws.is_replay and items[0].timestamp_s is not None:
        if arrivals is not None:
            raise UserError("a trace replays its own timestamps: drop --rate or use replay=false.")
        offsets = _replay_offsets(ws, items, num_requests, duration_s)
        count = len(offsets)
    elif arrivals is not None:
        offsets = make_offsets(
            arrivals, num_requests=num_requests, duration_s=duration_s, seed=seed
        )
        count = len(offsets)
    else:
        offsets = None
        count = closed_loop_count(concurrency, duration_s, num_requests)
    if count == 0:
        raise UserError("the run's bounds leave no request to send.")
    if ws.kind is WorkloadKind.AGENTIC:
        rng = np.random.default_rng(seed)
        built, sessions = _agentic(
            ws, _Ctx(rng, count, max_model_len, ws.flag("ignore_eos", True), tokenizer)
        )
        return Schedule(tuple(built), offsets, sessions)
    specs = make_specs(
        ws, count, seed=seed, max_model_len=max_model_len, tokenizer=tokenizer, items=items
    )
    return Schedule(specs, offsets)
