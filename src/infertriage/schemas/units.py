"""schemas, level 0: units and the run's time base.

Data is SI everywhere: seconds, bytes, fractions 0..1. Milliseconds and
percent exist only on screen. A `*_ts` is seconds on the run's monotonic
clock since the run started; `RunClock.wall_anchor_s` (Unix time at ts 0) is
stored in run.json and joins the run's clock to a server's wall-clock samples.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from infertriage.schemas.errors import UserError

__all__ = [
    "GB",
    "GIB",
    "MIB",
    "RunClock",
    "format_bytes",
    "format_seconds",
    "parse_bytes",
    "parse_duration",
    "parse_fraction",
]

KIB = 1024
MIB = 1024**2
GIB = 1024**3
GB = 10**9

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
}
_BYTES_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": KIB,
    "mib": MIB,
    "gib": GIB,
    "tib": 1024**4,
}
_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Zµ]*)\s*$")


def _split_quantity(text: str, what: str) -> tuple[float, str]:
    match = _QUANTITY.match(text)
    if match is None and text.strip().startswith("-"):
        raise UserError(f"{text!r} is not a {what}: it is negative.")
    if match is None:
        raise UserError(f"{text!r} is not a {what} (expected a number with an optional unit).")
    return float(match.group(1)), match.group(2)


def parse_duration(text: str, default_unit: str = "s") -> float:
    """'200ms' → 0.2, '1.5s' → 1.5, '2m' → 120.0; a bare number uses `default_unit`."""
    value, unit = _split_quantity(text, "duration")
    unit = unit or default_unit
    factor = _DURATION_UNITS.get(unit.lower() if unit != "µs" else unit)
    if factor is None:
        known = ", ".join(_DURATION_UNITS)
        raise UserError(f"{text!r} has an unknown time unit {unit!r} (use one of {known}).")
    return value * factor


def parse_fraction(text: str) -> float:
    """'5%' → 0.05, '0.05' → 0.05: the one way a fraction is written. A `ValueError` for
    text that is neither; the range (a share to 1, a positive change) is the caller's."""
    text = text.strip()
    return float(text[:-1]) / 100.0 if text.endswith("%") else float(text)


def parse_bytes(text: str, default_unit: str = "b") -> int:
    """'80GiB' → 85899345920, '3.35TB' → 3.35e12; a bare number uses `default_unit`."""
    value, unit = _split_quantity(text, "size")
    factor = _BYTES_UNITS.get((unit or default_unit).lower())
    if factor is None:
        known = ", ".join(_BYTES_UNITS)
        raise UserError(f"{text!r} has an unknown size unit {unit!r} (use one of {known}).")
    return round(value * factor)


def format_seconds(seconds: float) -> str:
    """A duration for the screen: '850 µs', '12.3 ms', '4.20 s'."""
    magnitude = abs(seconds)
    if magnitude < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if magnitude < 1.0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def format_bytes(num_bytes: float) -> str:
    """A size for the screen in binary units: '3.81 GiB'."""
    for unit, factor in (("TiB", 1024**4), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(num_bytes) >= factor:
            return f"{num_bytes / factor:.2f} {unit}"
    return f"{num_bytes:.0f} B"


@dataclass(slots=True)
class RunClock:
    """The run's time base: `now_ts()` is monotonic seconds since the run began."""

    start_ns: int = field(default_factory=time.perf_counter_ns)
    wall_anchor_s: float = field(default_factory=time.time)

    def now_ts(self) -> float:
        return (time.perf_counter_ns() - self.start_ns) * 1e-9

    def ts_from_ns(self, perf_counter_ns: int) -> float:
        """Turn a raw `time.perf_counter_ns()` stamp into run seconds."""
        return (perf_counter_ns - self.start_ns) * 1e-9

    def ts_from_wall(self, unix_s: float) -> float:
        """Place a server's wall-clock time on the run's clock."""
        return unix_s - self.wall_anchor_s
