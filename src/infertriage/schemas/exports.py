"""schemas, level 0: the other tools' formats a run can also be written in (`--export`).

Gives `ExportFormat` (`vllm`: the result JSON of `vllm bench serve --save-result`, one
file per load level; `aiperf`: AIPerf's `profile_export_aiperf.json` and
`profile_export.jsonl`, one folder per level; `timeline`: the client's timeline as a
Chrome/Perfetto trace, one file per level, `report.client_trace`) and `parse_exports`, which reads
`--export` as given (repeatable, or a comma list) into formats, each once, in the
order first named; `Exports` is the spec field's type that parses it (bench's and
diagnose's `exports`). `report.exports` writes them; `docs/exports.md` says what each
field means there.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BeforeValidator

from infertriage.schemas.errors import UserError

__all__ = ["EXPORTS_FOLDER", "ExportFormat", "Exports", "parse_exports"]

EXPORTS_FOLDER = "exports"  # under the run directory


class ExportFormat(StrEnum):
    VLLM = "vllm"
    AIPERF = "aiperf"
    TIMELINE = "timeline"


def parse_exports(values: str | Iterable[str | ExportFormat]) -> tuple[ExportFormat, ...]:
    """`--export vllm --export aiperf`, `--export vllm,aiperf`: the formats, each once."""
    items = [values] if isinstance(values, str) else list(values)
    out: list[ExportFormat] = []
    known = ", ".join(f.value for f in ExportFormat)
    for item in items:
        for part in str(item).split(","):
            text = part.strip().lower()
            if not text:
                continue
            try:
                chosen = ExportFormat(text)
            except ValueError:
                raise UserError(f"--export {part.strip()!r}: give {known}.") from None
            if chosen not in out:
                out.append(chosen)
    if items and not out:  # `--export ""`: a format was asked for, and none named
        raise UserError(f"--export names no format: give {known}.")
    return tuple(out)


def _parsed(value: Any) -> Any:
    return parse_exports(value) if isinstance(value, str | list | tuple) else value


# A spec's `--export` field: the formats, parsed from what the flag or run.json gives.
Exports = Annotated[tuple[ExportFormat, ...], BeforeValidator(_parsed)]
