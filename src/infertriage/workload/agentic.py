"""workload, level 1: agentic sessions — the requests an agent loop sends, and when.

Takes the options of `--workload agentic:…` (already parsed by `build`), a seeded
generator and a request count; gives the requests and the `SessionStep`s that order
them. A session is `turns` turns over one growing history, as agents send it:
every request's prompt is the whole history so far plus its new message, opened by
one system message (a system prompt and tool definitions) shared by every session.
A turn is one of

- plain: the user's message, answered; the next turn follows after `think` seconds;
- tool call (`tool_share` of turns): the answer is a tool call; after `tool_latency`
  seconds the tool's result (`tool_result` tokens) goes back in a request of its own;
- fan-out (`fanout_share` of turns, `fanout=K` children): the answer is a plan; at
  once K sub-requests go out together, each the whole history plus its own sub-task,
  and the turn ends when all K are answered; their answers open the next user message.

Replies in the history are synthetic text of the lengths asked (`output`), as
`multiturn:` sends, not the server's own answers: every prompt is known before the
run, so the schedule is seeded and deterministic. Messages alternate user/assistant
after the one system message (strict chat templates refuse anything else), so a tool
result is sent as a user message. Delays are seconds: `0.5`, `uniform(a,b)`,
`normal(m,s)` or `lognormal(median,p90)`, never below 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from infertriage.schemas import UserError
from infertriage.workload.lengths import Z90, LengthDist
from infertriage.workload.spec import RequestSpec, Session, SessionStep, SynthText, Turn

__all__ = ["AgenticShape", "DelayDist", "build_sessions", "parse_delay"]

_CALL = re.compile(r"^\s*(uniform|normal|lognormal)\s*\(\s*([^(),]+),\s*([^(),]+)\)\s*$")
# Keys of synthetic text: the shared system message, and each session's own messages.
_SHARED_KEY = 1 << 42
_SESSION_KEY = 1 << 43
_KEYS_PER_SESSION = 1 << 16
_BATCH = 256  # lengths drawn per numpy call


@dataclass(frozen=True, slots=True)
class DelayDist:
    """Seconds, drawn per gap: fixed, uniform(a,b), normal(mean,sd) or lognormal(median,p90)."""

    kind: str
    a: float
    b: float = 0.0

    def sample(self, rng: np.random.Generator) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            value = float(rng.uniform(self.a, self.b))
        elif self.kind == "normal":
            value = float(rng.normal(self.a, self.b))
        else:
            value = float(rng.lognormal(math.log(self.a), math.log(self.b / self.a) / Z90))
        return max(0.0, value)


def parse_delay(text: str, what: str) -> DelayDist:
    """`0.5`, `uniform(a,b)`, `normal(m,s)` or `lognormal(median,p90)`, in seconds."""
    bad = UserError(
        f"{what}={text!r} is not a delay in seconds (use 0.5, uniform(a,b), normal(m,s) or "
        "lognormal(median,p90))."
    )
    try:
        value = float(text)
    except ValueError:
        match = _CALL.match(text.lower())
        if match is None:
            raise bad from None
        try:
            kind, a, b = match.group(1), float(match.group(2)), float(match.group(3))
        except ValueError:
            raise bad from None
        ok = {
            "uniform": 0 <= a <= b,
            "normal": a >= 0 and b >= 0,
            "lognormal": 0 < a <= b,
        }[kind]
        if not ok or not math.isfinite(a + b):
            raise bad from None
        return DelayDist(kind, a, b)
    if not 0 <= value < math.inf:
        raise bad
    return DelayDist("fixed", value)


@dataclass(frozen=True, slots=True)
class AgenticShape:
    """What one `agentic:` workload asks for (its options, parsed)."""

    turns: LengthDist
    user: LengthDist  # each user message (a fan-out child's sub-task too)
    output: LengthDist  # each answer
    shared_tokens: int  # the system prompt plus tool definitions, shared by every session
    think: DelayDist
    tool_share: float
    tool_result: LengthDist
    tool_latency: DelayDist
    fanout: int
    fanout_share: float
    ignore_eos: bool = True
    shared_key: int = field(default=_SHARED_KEY)


@dataclass(slots=True)
class _Lengths:
    """Lengths of one distribution drawn a batch at a time (one numpy call per batch)."""

    dist: LengthDist
    rng: np.random.Generator
    batch: list[int] = field(default_factory=list)

    def next(self) -> int:
        if not self.batch:
            self.batch = self.dist.sample(self.rng, _BATCH).tolist()[::-1]
        return self.batch.pop()


@dataclass(slots=True)
class _Builder:
    shape: AgenticShape
    rng: np.random.Generator
    count: int
    specs: list[RequestSpec] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    turns: _Lengths = field(init=False)
    user: _Lengths = field(init=False)
    output: _Lengths = field(init=False)
    tool_result: _Lengths = field(init=False)

    def __post_init__(self) -> None:
        shape, rng = self.shape, self.rng
        self.turns, self.user = _Lengths(shape.turns, rng), _Lengths(shape.user, rng)
        self.output, self.tool_result = (
            _Lengths(shape.output, rng),
            _Lengths(shape.tool_result, rng),
        )

    def full(self) -> bool:
        return len(self.specs) >= self.count

    def _send(self, turns: list[Turn], labels: tuple[tuple[str, str], ...]) -> tuple[int, int]:
        """One request of `turns`; gives its index and its answer's length."""
        out = self.output.next()
        total = sum(t.content.num_tokens for t in turns if isinstance(t.content, SynthText))
        index = len(self.specs)
        spec = RequestSpec(index, tuple(turns), total, out, self.shape.ignore_eos, labels)
        self.specs.append(spec)
        return index, out

    def session(self, sid: int) -> None:
        shape, rng = self.shape, self.rng
        keys = iter(range(_SESSION_KEY + sid * _KEYS_PER_SESSION, 1 << 62))
        history = [Turn("system", SynthText(shape.shared_tokens, shape.shared_key))]
        steps: list[SessionStep] = []
        carried = 0  # fan-out children's answers, folded into the next user message
        delay = 0.0
        num_turns = self.turns.next()
        for turn in range(num_turns):
            if self.full():
                break
            tag = (("session", str(sid)), ("turn", str(turn)))
            kind = rng.random()
            length = carried + self.user.next()
            history.append(Turn("user", SynthText(length, next(keys))))
            index, out = self._send(history, (*tag, ("step", "turn")))
            steps.append(SessionStep((index,), delay))
            history.append(Turn("assistant", SynthText(out, next(keys))))
            carried, delay = 0, shape.think.sample(rng)
            if kind < shape.fanout_share and shape.fanout > 0:
                children: list[int] = []
                for child in range(shape.fanout):
                    if self.full():
                        break
                    task = Turn("user", SynthText(self.user.next(), next(keys)))
                    labels = (*tag, ("step", "fanout_child"), ("child", str(child)))
                    index, out = self._send([*history, task], labels)
                    children.append(index)
                    carried += out
                if children:
                    steps.append(SessionStep(tuple(children), 0.0))
            elif kind < shape.fanout_share + shape.tool_share and not self.full():
                result = self.tool_result.next()
                history.append(Turn("user", SynthText(result, next(keys))))
                index, out = self._send(history, (*tag, ("step", "tool_result")))
                steps.append(SessionStep((index,), shape.tool_latency.sample(rng)))
                history.append(Turn("assistant", SynthText(out, next(keys))))
        if steps:
            self.sessions.append(tuple(steps))


def build_sessions(
    shape: AgenticShape, rng: np.random.Generator, count: int
) -> tuple[list[RequestSpec], tuple[Session, ...]]:
    """`count` requests of whole sessions (the last one cut at `count`), and their sessions.

    `shape.tool_share + shape.fanout_share` is at most 1 (`build.agentic_shape` sees to it).
    """
    builder = _Builder(shape, rng, count)
    sid = 0
    while not builder.full():
        builder.session(sid)
        sid += 1
    return builder.specs, tuple(builder.sessions)
