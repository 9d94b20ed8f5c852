"""The corpus of real incidents: excerpts pasted in public issue threads, labelled by the thread.

Each case is one file under `tests/data/incidents/<engine>/NNN-slug.txt`: a header of
`# key: value` lines (incident, source, engine, input, cause, said, expect), a line
`# ---`, then the excerpt exactly as pasted (a server log, or a `/metrics` dump). The
label (`expect`) is the layer the thread's established cause lies in, or `healthy`
(nothing was wrong with serving), or `artefact` (the log or metric itself was wrong) —
taken from the thread (a maintainer, a merged fix), never from infertriage's output.

`run_case` feeds the excerpt to the command an operator would use (`infertriage logs
FILE --json`, or `infertriage diagnose --metrics-file FILE --json`) in-process and
`score` says whether the verdict is the thread's: the primary layer for a layer label;
no primary for `healthy`; no primary and an artefact finding for `artefact`.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LABELS", "Case", "Outcome", "load_cases", "run_case", "score"]

LAYERS = (
    "hardware",
    "kernel",
    "memory",
    "scheduling",
    "parallelism",
    "speculative",
    "application",
)
LABELS = (*LAYERS, "healthy", "artefact")
_KEYS = ("incident", "source", "engine", "input", "cause", "said", "expect")


@dataclass(frozen=True, slots=True)
class Case:
    path: Path
    header: dict[str, str]
    excerpt: str

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"

    @property
    def expect(self) -> str:
        return self.header["expect"]

    @property
    def engine(self) -> str:
        return self.header["engine"]

    @property
    def input(self) -> str:
        return self.header["input"]


@dataclass(frozen=True, slots=True)
class Outcome:
    case: Case
    exit_code: int
    primary: str | None  # the primary layer, None when there is none
    finding: str | None  # the primary finding's id
    artefact: bool  # some finding says the evidence itself is wrong
    error: str  # what the command wrote on stderr when it refused

    @property
    def verdict(self) -> str:
        if self.exit_code != 0:
            return "refused"
        if self.primary is not None:
            return self.primary
        return "artefact" if self.artefact else "healthy"


def parse_case(path: Path) -> Case:
    """One case file; a `ValueError` naming the file when its header is not whole."""
    text = path.read_text(encoding="utf-8")
    head, sep, body = text.partition("\n# ---\n")
    if not sep:
        raise ValueError(f"{path}: no '# ---' line between the header and the excerpt")
    header: dict[str, str] = {}
    for line in head.splitlines():
        key, colon, value = line.removeprefix("#").partition(":")
        if colon and key.strip() in _KEYS and key.strip() not in header:
            header[key.strip()] = value.strip()
    missing = [k for k in _KEYS if not header.get(k)]
    if missing:
        raise ValueError(f"{path}: header lacks {', '.join(missing)}")
    header["expect"] = header["expect"].split()[0].lower()
    header["input"] = header["input"].split()[0].lower()
    if header["expect"] not in LABELS:
        raise ValueError(f"{path}: expect {header['expect']!r} is not one of {LABELS}")
    if header["input"] not in ("log", "metrics"):
        raise ValueError(f"{path}: input {header['input']!r} is not log or metrics")
    return Case(path, header, body)


def load_cases(root: Path) -> list[Case]:
    """Every case under `root` (`tests/data/incidents`), in name order."""
    return [parse_case(p) for p in sorted(root.glob("*/[0-9]*.txt"))]


@contextlib.contextmanager
def _captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def _primary(document: dict[str, Any]) -> tuple[str | None, str | None, bool]:
    diagnosis = document.get("diagnosis", document)
    primary = diagnosis.get("primary")
    findings = [f for layer in diagnosis.get("layers", []) for f in layer.get("findings", [])]
    artefact = any(str(f.get("id", "")).startswith("evidence.") for f in findings)
    if primary is None:
        return None, None, artefact
    return str(primary["layer"]), str(primary["finding"]), artefact


def run_case(case: Case, workdir: Path) -> Outcome:
    """Run the operator's command on the excerpt (written to `workdir`) and read its verdict."""
    from infertriage.cli import main  # noqa: PLC0415  # the product: only when a case runs

    suffix = ".log" if case.input == "log" else ".prom"
    path = workdir / f"{case.path.stem}{suffix}"
    path.write_text(case.excerpt if case.excerpt.endswith("\n") else case.excerpt + "\n")
    argv = (
        ["logs", str(path), "--json"]
        if case.input == "log"
        else ["diagnose", "--metrics-file", str(path), "--json"]
    )
    with _captured() as (out, err):
        code = main(argv)
    if code != 0:
        return Outcome(case, code, None, None, False, err.getvalue().strip())
    layer, finding, artefact = _primary(json.loads(out.getvalue()))
    return Outcome(case, code, layer, finding, artefact, "")


def score(outcome: Outcome) -> bool:
    """Whether the verdict is the thread's (see the module docstring)."""
    return outcome.verdict == outcome.case.expect
