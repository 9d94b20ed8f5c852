"""plan, level 1: `--what-if KEY=V1,V2,…` sweeps of any plan input into one table.

Takes the base `PlanInputs` and the sweep specs; gives one `WhatIfRow` per
combination (the cartesian product of the sweeps), each with its plan or the
one-sentence reason it is impossible.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infertriage.plan.capacity import CapacityPlan, PlanInputs, make_capacity_plan
from infertriage.plan.gpus import get_gpu
from infertriage.plan.memory import normalize_dtype
from infertriage.plan.models import load_model
from infertriage.schemas.errors import UserError
from infertriage.schemas.units import parse_fraction

__all__ = ["MAX_WHAT_IF_ROWS", "WHAT_IF_KEYS", "WhatIfRow", "parse_what_if", "sweep"]

MAX_WHAT_IF_ROWS = 256


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _nonzero_share(text: str) -> float:
    value = parse_fraction(text)
    if not 0 < value <= 1:
        raise ValueError(text)
    return value


# flag name → (PlanInputs field, parser)
WHAT_IF_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "concurrency": ("concurrency", _positive_int),
    "max-model-len": ("max_model_len", _positive_int),
    "input-len": ("input_len", _positive_int),
    "output-len": ("output_len", _positive_int),
    "tp": ("tp", _positive_int),
    "pp": ("pp", _positive_int),
    "ep": ("ep", _positive_int),
    "num-gpus": ("num_gpus", _positive_int),
    "block-size": ("block_size", _positive_int),
    "max-num-seqs": ("max_num_seqs", _positive_int),
    "max-num-batched-tokens": ("max_num_batched_tokens", _positive_int),
    "gpu-memory-utilization": ("gpu_memory_utilization", _nonzero_share),
    "dtype": ("dtype", normalize_dtype),
    "kv-dtype": ("kv_dtype", normalize_dtype),
    "gpu": ("gpu", get_gpu),
    "model": ("model", load_model),
}


@dataclass(frozen=True, slots=True)
class WhatIfRow:
    values: tuple[tuple[str, str], ...]  # (flag, value as written)
    plan: CapacityPlan | None
    error: str = ""


def parse_what_if(spec: str) -> tuple[str, list[tuple[str, object]]]:
    """'concurrency=8,16' → ('concurrency', [('8', 8), ('16', 16)])."""
    key, sep, raw_values = spec.partition("=")
    key = key.strip().replace("_", "-")
    if not sep or not raw_values.strip():
        raise UserError(f"--what-if {spec!r} is not KEY=V1,V2,….")
    if key not in WHAT_IF_KEYS:
        raise UserError(f"--what-if key {key!r} is unknown (known: {', '.join(WHAT_IF_KEYS)}).")
    _, parse = WHAT_IF_KEYS[key]
    values: list[tuple[str, object]] = []
    for text in (part.strip() for part in raw_values.split(",")):
        try:
            values.append((text, parse(text)))
        except ValueError as err:
            raise UserError(f"--what-if {key}: {text!r} is not a valid value.") from err
    return key, values


def sweep(base: PlanInputs, specs: Sequence[str]) -> list[WhatIfRow]:
    parsed = [parse_what_if(spec) for spec in specs]
    keys = [key for key, _ in parsed]
    if len(set(keys)) != len(keys):
        raise UserError("each --what-if key may be given once.")
    combos = list(itertools.product(*(values for _, values in parsed)))
    if len(combos) > MAX_WHAT_IF_ROWS:
        raise UserError(f"--what-if makes {len(combos)} rows; keep it under {MAX_WHAT_IF_ROWS}.")
    rows = []
    for combo in combos:
        changes = {WHAT_IF_KEYS[key][0]: value for key, (_, value) in zip(keys, combo, strict=True)}
        labels = tuple((key, text) for key, (text, _) in zip(keys, combo, strict=True))
        try:
            rows.append(WhatIfRow(labels, make_capacity_plan(base.replace(**changes))))
        except UserError as err:
            rows.append(WhatIfRow(labels, None, str(err)))
    return rows
