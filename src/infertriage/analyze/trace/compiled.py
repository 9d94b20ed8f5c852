"""analyze, level 1: torch.compile regions in a trace and recompilations in a log.

Takes a `TraceTable` (its `COMPILED` ranges: `Torch-Compiled Region: F/A`,
`CompiledFunction`, …) and optionally the text of a log written with
`TORCH_LOGS=recompiles`; gives `Compiled`. In a trace, `F/A` is the frame id
and the compile attempt: an attempt above 0 is a recompilation of frame F. In
a log, each `Recompiling function NAME in FILE:LINE` line is one
recompilation; `recompile_limit`/`cache_size_limit` lines say that dynamo gave
up and runs the frame eagerly.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from infertriage.analyze.trace.table import RangeKind, TraceTable

__all__ = ["Compiled", "RecompileLog", "get_compiled", "parse_recompile_log"]

_FRAME = re.compile(r"(\d+)/(\d+)")
_RECOMPILE = re.compile(r"Recompiling function (\S+)")
_LIMIT = re.compile(r"(recompile_limit|cache_size_limit)")


@dataclass(frozen=True, slots=True)
class Compiled:
    """torch.compile evidence of one trace."""

    num_regions: int  # compiled-region events (each call of a compiled frame)
    recompilations: int  # distinct (frame, attempt) pairs with attempt > 0
    region_ns: int  # host time inside compiled regions


@dataclass(frozen=True, slots=True)
class RecompileLog:
    recompilations: int
    functions: tuple[tuple[str, int], ...]  # (function, recompilations), most first
    limit_hits: int


def get_compiled(table: TraceTable) -> Compiled:
    ranges = table.ranges
    rows = np.flatnonzero(ranges.kind == RangeKind.COMPILED)
    attempts: set[tuple[str, str]] = set()
    for name_id in np.unique(ranges.name[rows]).tolist():
        match = _FRAME.search(table.strings[name_id])
        if match and match.group(2) != "0":
            attempts.add((match.group(1), match.group(2)))
    return Compiled(
        num_regions=len(rows),
        recompilations=len(attempts),
        region_ns=int((ranges.end_ns[rows] - ranges.start_ns[rows]).sum()),
    )


def parse_recompile_log(text: str | Iterable[str]) -> RecompileLog:
    """Recompilations in a `TORCH_LOGS=recompiles` log, its text or its lines (other lines
    are ignored)."""
    functions: Counter[str] = Counter()
    limit_hits = 0
    for line in text.splitlines() if isinstance(text, str) else text:
        if "ecompil" not in line and "_limit" not in line:  # most lines: cheaper than a regex
            continue
        match = _RECOMPILE.search(line)
        if match:
            functions[match.group(1)] += 1
        elif _LIMIT.search(line):
            limit_hits += 1
    return RecompileLog(
        recompilations=sum(functions.values()),
        functions=tuple(functions.most_common()),
        limit_hits=limit_hits,
    )
