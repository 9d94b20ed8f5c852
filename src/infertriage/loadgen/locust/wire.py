"""loadgen, level 2: what travels between bench, the Locust master and its workers.

Takes a `LoadPlan`, a `ClientConfig` and `WorkerReport`s; gives plain JSON and
msgpack values (dicts, lists, numbers, strings) and back, so a worker on
another host rebuilds the same specs without unpickling anything. The API key
never travels: a worker reads it from its own `OPENAI_API_KEY`. `share_plan`
splits one plan over the workers by the Locust users each was given.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import numpy as np

from infertriage.loadgen.request import ClientConfig, Endpoint
from infertriage.loadgen.runner import LoadPlan, WorkerReport
from infertriage.loadgen.workers import split_plan
from infertriage.workload import RequestSpec, Schedule, SynthText, Turn

DEFAULT_PORT = 5557  # Locust's own default for the master

__all__ = [
    "DEFAULT_PORT",
    "decode_config",
    "decode_plan",
    "decode_report",
    "encode_config",
    "encode_plan",
    "encode_report",
    "share_plan",
]


def _encode_spec(spec: RequestSpec) -> list[Any]:
    turns = [
        [t.role, t.content if isinstance(t.content, str) else [t.content.num_tokens, t.content.key]]
        for t in spec.turns
    ]
    labels = [list(pair) for pair in spec.labels]
    return [spec.index, turns, spec.prompt_tokens, spec.max_tokens, spec.ignore_eos, labels]


def _decode_spec(value: list[Any]) -> RequestSpec:
    index, turns, prompt_tokens, max_tokens, ignore_eos, labels = value
    return RequestSpec(
        index=int(index),
        turns=tuple(
            Turn(role, content if isinstance(content, str) else SynthText(*content))
            for role, content in turns
        ),
        prompt_tokens=int(prompt_tokens),
        max_tokens=int(max_tokens),
        ignore_eos=bool(ignore_eos),
        labels=tuple((str(k), str(v)) for k, v in labels),
    )


def encode_plan(plan: LoadPlan) -> dict[str, Any]:
    offsets = plan.schedule.offsets_s
    return {
        "specs": [_encode_spec(spec) for spec in plan.schedule.specs],
        "offsets_s": None if offsets is None else offsets.tolist(),
        "concurrency": plan.concurrency,
        "max_concurrency": plan.max_concurrency,
        "think_time_s": plan.think_time_s,
        "duration_s": plan.duration_s,
        "drain_timeout_s": plan.drain_timeout_s,
        "drain_settle_share": plan.drain_settle_share,
        "id_prefix": plan.id_prefix,
        "labels": [list(pair) for pair in plan.labels],
    }


def decode_plan(value: dict[str, Any]) -> LoadPlan:
    offsets = value["offsets_s"]
    specs = tuple(_decode_spec(spec) for spec in value["specs"])
    schedule = Schedule(specs, None if offsets is None else np.asarray(offsets, dtype=np.float64))
    return LoadPlan(
        schedule=schedule,
        concurrency=value["concurrency"],
        max_concurrency=value["max_concurrency"],
        think_time_s=float(value["think_time_s"]),
        duration_s=value["duration_s"],
        drain_timeout_s=float(value["drain_timeout_s"]),
        drain_settle_share=(
            None if value["drain_settle_share"] is None else float(value["drain_settle_share"])
        ),
        id_prefix=str(value["id_prefix"]),
        labels=tuple((str(k), str(v)) for k, v in value["labels"]),
    )


def encode_config(config: ClientConfig) -> dict[str, Any]:
    """The config without the key; `needs_key` says a worker must supply its own."""
    fields = asdict(config)
    fields["needs_key"] = fields.pop("api_key") is not None
    fields["endpoint"] = config.endpoint.value
    fields["headers"] = [list(pair) for pair in config.headers]
    return fields


def decode_config(value: dict[str, Any], api_key: str | None) -> ClientConfig:
    fields = dict(value)
    fields.pop("needs_key", None)
    fields["endpoint"] = Endpoint(fields["endpoint"])
    fields["headers"] = tuple((str(k), str(v)) for k, v in fields["headers"])
    return ClientConfig(api_key=api_key, **fields)


def encode_report(report: WorkerReport) -> dict[str, Any]:
    fields = asdict(report)
    fields["loop_lag_s"] = list(report.loop_lag_s)
    return fields


def decode_report(value: dict[str, Any]) -> WorkerReport:
    return WorkerReport(**{**value, "loop_lag_s": tuple(value["loop_lag_s"])})


def share_plan(plan: LoadPlan, users: list[int]) -> list[LoadPlan | None]:
    """Each worker's part of the plan, None for a worker with no user.

    A closed loop's C users are the Locust users, wherever Locust put them: request i
    goes to user slot i mod C, so each worker gets its users' share of the requests.
    An open loop's schedule goes round-robin over the workers with a user (one
    issuer each), every deadline kept, as `--workers` splits it.
    """
    active = [w for w, count in enumerate(users) if count > 0]
    shares: list[LoadPlan | None] = [None] * len(users)
    if not active:
        return shares
    if not plan.closed:
        for w, share in zip(active, split_plan(plan, len(active)), strict=False):
            shares[w] = share
        return shares
    owner = [w for w in active for _ in range(users[w])]
    specs = plan.schedule.specs
    for w in active:
        picked = [i for i in range(len(specs)) if owner[i % len(owner)] == w]
        if picked:
            shares[w] = replace(plan, schedule=plan.schedule.take(picked), concurrency=users[w])
    return shares
