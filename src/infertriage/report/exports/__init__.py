"""report.exports, level 4: a run's load levels in other tools' formats (`--export`).

Takes the `ExportLevel`s of a run (`api.exports` reads them from its directory)
and the `ExportFormat`s asked for; `write_exports` writes, under `RUN/exports/`,
`vllm/<level>.json` (vLLM's `bench serve --save-result` JSON, `report.exports.vllm`)
and `aiperf/<level>/profile_export_aiperf.json` with `profile_export.jsonl`
(AIPerf's summary and per-request records, `report.exports.aiperf`) and
`timeline/<level>.json` (the client's timeline as a Chrome/Perfetto trace,
`report.client_trace`), one per level, and gives the paths written. A level is
named as run.json names it, made a file name (`concurrency=8` → `concurrency_8`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from infertriage.report.client_trace import client_trace
from infertriage.report.exports.aiperf import JSON_FILE, JSONL_FILE, aiperf_records, aiperf_summary
from infertriage.report.exports.level import ExportLevel, file_stems
from infertriage.report.exports.vllm import vllm_result
from infertriage.schemas import UserError
from infertriage.schemas.exports import EXPORTS_FOLDER, ExportFormat

__all__ = ["ExportLevel", "write_exports"]


def _dump(document: object) -> str:
    # vLLM and AIPerf write plain JSON; a non-finite number would not load in AIPerf
    return json.dumps(document, ensure_ascii=False, allow_nan=False)


def _write_vllm(folder: Path, level: ExportLevel, stem: str) -> list[Path]:
    path = folder / f"{stem}.json"
    path.write_text(_dump(vllm_result(level)) + "\n", encoding="utf-8")
    return [path]


def _write_aiperf(folder: Path, level: ExportLevel, stem: str) -> list[Path]:
    where = folder / stem
    where.mkdir(parents=True, exist_ok=True)
    summary, records = where / JSON_FILE, where / JSONL_FILE
    text = json.dumps(aiperf_summary(level), indent=2, ensure_ascii=False, allow_nan=False)
    summary.write_text(text + "\n", encoding="utf-8")
    with records.open("w", encoding="utf-8") as handle:
        for record in aiperf_records(level):
            handle.write(_dump(record) + "\n")
    return [summary, records]


def _write_timeline(folder: Path, level: ExportLevel, stem: str) -> list[Path]:
    path = folder / f"{stem}.json"
    path.write_bytes(client_trace(level.records, level.name, level.server, level.wall_anchor_s))
    return [path]


_WRITERS = {
    ExportFormat.VLLM: _write_vllm,
    ExportFormat.AIPERF: _write_aiperf,
    ExportFormat.TIMELINE: _write_timeline,
}


def write_exports(
    root: Path, levels: Sequence[ExportLevel], formats: Sequence[ExportFormat]
) -> tuple[Path, ...]:
    """Each level in each format under `root/exports/`; the files written, in order."""
    written: list[Path] = []
    stems = file_stems([level.name for level in levels])
    try:
        for fmt in formats:
            folder = root / EXPORTS_FOLDER / fmt.value
            folder.mkdir(parents=True, exist_ok=True)
            for level, stem in zip(levels, stems, strict=True):
                written += _WRITERS[fmt](folder, level, stem)
    except OSError as err:
        raise UserError(f"cannot write the {fmt.value} export in {root}: {err.strerror}.") from err
    return tuple(written)
