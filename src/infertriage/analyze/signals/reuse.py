"""analyze.signals, level 1: prefix reuse as the client sent it (a perfect cache's upper bound).

Takes the `RequestRecord`s of a level (each with its `prompt_prefix` marks, one per
message: a digest of the messages so far and their tokens); gives `PrefixReuse` and
`workload.*` signals. A request's reused tokens are the longest prefix it shares with
any request sent before it in the run, other levels' included (by message:
`workload.prefix_marks`), cut to
whole `REUSE_BLOCK_TOKENS`-token blocks and to one token short of the prompt (vLLM's
prefix cache hits whole blocks and always computes a prompt's last token): the upper
bound of what a perfect prefix cache could have hit. Only requests the server answered
(HTTP 200) count, as the sent prompts a cache could have kept. Signals:

- `workload.prefix_reuse`: reused / prompt tokens over every request (fraction), and
  `workload.prompts`, how many prompts it counts (a rate over two is chance);
- `workload.session_prefix_reuse`: its mean over sessions (a record's `session` or
  `conversation` label), with `workload.sessions`, the number of sessions;
- where every counted response named its replica (`replica` label, from a header in
  `loadgen.response.REPLICA_HEADERS`): `workload.replicas`, `workload.replica_prefix_reuse`
  (the reuse when each replica's cache sees only what that replica was sent) and
  `workload.prefix_reuse_by_replica.<replica>`; else nothing about replicas.

A chat template's framing tokens are not counted (`workload.prefix_marks`), so the
fractions are the prompts' as built, a few tokens a message off the server's count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infertriage.schemas import RequestRecord, Signal

__all__ = ["REUSE_BLOCK_TOKENS", "PrefixReuse", "prefix_reuse", "reuse_signals", "reused_tokens"]

REUSE_BLOCK_TOKENS = 16  # vLLM's default KV block (`--block-size`); SGLang's radix cache: 1
_SESSION_LABELS = ("session", "conversation")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def reused_tokens(
    marks: Sequence[tuple[str, int]], seen: set[str], block: int = REUSE_BLOCK_TOKENS
) -> int:
    """Tokens of a prompt whose prefix an earlier prompt sent (digests in `seen`), block-cut."""
    if not marks:
        return 0
    shared = 0
    for digest, upto in marks:
        if digest not in seen:
            break
        shared = upto
    shared = min(shared, marks[-1][1] - 1)
    return max(0, shared) // block * block


@dataclass(frozen=True, slots=True)
class _Tally:
    prompt: int = 0
    reused: int = 0
    num_prompts: int = 0

    def add(self, prompt: int, reused: int) -> _Tally:
        return _Tally(self.prompt + prompt, self.reused + reused, self.num_prompts + 1)

    @property
    def share(self) -> float:
        return self.reused / self.prompt if self.prompt else 0.0


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """Reused and prompt tokens over the run, by session and, where known, by replica."""

    prompt_tokens: int
    reused_tokens: int
    num_prompts: int  # the prompts counted
    by_session: dict[str, float]  # each session's reused / prompt tokens
    by_replica: dict[str, float]  # each replica's, against what that replica was sent
    replica_reused_tokens: int  # the sum over replicas of what each could have hit

    @property
    def share(self) -> float:
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def session_share(self) -> float | None:
        values = list(self.by_session.values())
        return sum(values) / len(values) if values else None

    @property
    def replica_share(self) -> float | None:
        if not self.by_replica or not self.prompt_tokens:
            return None
        return self.replica_reused_tokens / self.prompt_tokens

    def describe(self) -> str:
        """One line for a terminal summary."""
        line = f"prefix reuse: {self.share:.0%} of prompt tokens repeat an earlier prefix"
        if self.by_session:
            line += f" ({len(self.by_session)} sessions)"
        replica = self.replica_share
        if replica is not None:
            line += f"; {replica:.0%} within the replica that served them ({len(self.by_replica)})"
        return line


def _session(record: RequestRecord) -> str | None:
    return next((record.labels[k] for k in _SESSION_LABELS if k in record.labels), None)


def _taken(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """Prompts the server took (HTTP 200) with their marks."""
    return [r for r in records if r.http_status == 200 and r.prompt_prefix]


def prefix_reuse(
    records: Iterable[RequestRecord],
    block: int = REUSE_BLOCK_TOKENS,
    *,
    run: Iterable[RequestRecord] = (),
) -> PrefixReuse | None:
    """The reuse over `records`; None when none carries its prompt's marks.

    `run`: every record of the run (it may hold `records`): those sent before one of
    `records` are prefixes it could reuse (a warm-up level's), though not counted.
    """
    counted = _taken(records)
    if not counted:
        return None
    mine = {id(r) for r in counted}
    everything = counted + [r for r in _taken(run) if id(r) not in mine]
    everything.sort(key=lambda r: (r.sent_ts, r.id))
    with_replica = all("replica" in r.labels for r in counted)
    seen: set[str] = set()
    seen_by: dict[str, set[str]] = {}
    total = _Tally()
    sessions: dict[str, _Tally] = {}
    replicas: dict[str, _Tally] = {}
    for record in everything:
        marks = record.prompt_prefix
        if id(record) not in mine:  # sent by another level: a prefix to reuse, not counted
            seen.update(digest for digest, _ in marks)
            if with_replica and "replica" in record.labels:
                own = seen_by.setdefault(record.labels["replica"], set())
                own.update(digest for digest, _ in marks)
            continue
        prompt, reused = marks[-1][1], reused_tokens(marks, seen, block)
        total = total.add(prompt, reused)
        session = _session(record)
        if session is not None:
            sessions[session] = sessions.get(session, _Tally()).add(prompt, reused)
        if with_replica:
            name = record.labels["replica"]
            own = seen_by.setdefault(name, set())
            local = reused_tokens(marks, own, block)
            replicas[name] = replicas.get(name, _Tally()).add(prompt, local)
            own.update(digest for digest, _ in marks)
        seen.update(digest for digest, _ in marks)
    return PrefixReuse(
        prompt_tokens=total.prompt,
        reused_tokens=total.reused,
        num_prompts=total.num_prompts,
        by_session={name: tally.share for name, tally in sessions.items()},
        by_replica={name: tally.share for name, tally in replicas.items()},
        replica_reused_tokens=sum(tally.reused for tally in replicas.values()),
    )


def reuse_signals(
    records: Sequence[RequestRecord],
    window: tuple[float, float] = (0.0, 0.0),
    *,
    run: Sequence[RequestRecord] = (),
) -> list[Signal]:
    """The `workload.*` prefix-reuse signals of a level (none when no record has marks);
    `run` as `prefix_reuse` takes it."""
    reuse = prefix_reuse(records, run=run)
    if reuse is None:
        return []

    def signal(name: str, value: float, unit: str) -> Signal:
        return Signal(name=name, value=float(value), unit=unit, source="client", window=window)

    out = [
        signal("workload.prefix_reuse", reuse.share, "fraction"),
        signal("workload.prompts", reuse.num_prompts, "requests"),
    ]
    session_share = reuse.session_share
    if session_share is not None:
        out.append(signal("workload.session_prefix_reuse", session_share, "fraction"))
        out.append(signal("workload.sessions", len(reuse.by_session), "sessions"))
    replica_share = reuse.replica_share
    if replica_share is not None:
        out.append(signal("workload.replicas", len(reuse.by_replica), "replicas"))
        out.append(signal("workload.replica_prefix_reuse", replica_share, "fraction"))
        for name, share in sorted(reuse.by_replica.items()):
            safe = _NAME_UNSAFE.sub("_", name)[:64]
            out.append(signal(f"workload.prefix_reuse_by_replica.{safe}", share, "fraction"))
    return out
