"""schemas, level 0: findings and the diagnosis document (`infertriage.diagnosis/v1`).

A rule emits `Finding`s; `diagnose` ranks them into a `Diagnosis` that holds
all seven layers, the primary bottleneck, the causal chain and the SLO
results, with the window they were judged over and its validity (VALID, or
INVALID with the reason: a map judged on too small a sample says so). This
is the JSON written to diagnosis.json and printed by `--json`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from infertriage.schemas.frozen import FrozenModel
from infertriage.schemas.layers import LAYER_ORDER, Layer, Status
from infertriage.schemas.spans import SpanJoin
from infertriage.schemas.validity import Validity

__all__ = [
    "DIAGNOSIS_SCHEMA",
    "ChainLink",
    "Diagnosis",
    "EvidenceItem",
    "Finding",
    "JudgedWindow",
    "LayerResult",
    "Primary",
    "SloResult",
]

DIAGNOSIS_SCHEMA = "infertriage.diagnosis/v1"


class EvidenceItem(FrozenModel):
    """One signal a finding used, with the threshold it was held against."""

    signal: str
    value: float
    unit: str
    threshold: float | None = None
    source: str = ""


class Finding(FrozenModel):
    """What one rule concluded. `score` = `severity` × `explains`."""

    id: str
    layer: Layer
    status: Literal[Status.WARNING, Status.BOTTLENECK]
    severity: float = Field(ge=0.0, le=1.0)
    explains: float = Field(ge=0.0, le=1.0)
    score: float = Field(ge=0.0, le=1.0)
    title: str
    evidence: tuple[EvidenceItem, ...] = ()
    explanation: str = ""
    next_steps: tuple[str, ...] = ()
    # why this run cannot call it the server's bottleneck (e.g. the load client shared a
    # saturated host with it); a finding with a caveat is a warning, never the primary
    caveat: str = ""

    @model_validator(mode="after")
    def _score_is_product(self) -> Finding:
        if abs(self.score - self.severity * self.explains) > 1e-9:
            raise ValueError("score must equal severity × explains")
        return self


class LayerResult(FrozenModel):
    layer: Layer
    status: Status
    score: float = Field(ge=0.0, le=1.0, default=0.0)
    findings: tuple[Finding, ...] = ()
    missing: tuple[str, ...] = ()  # what would collect the absent evidence: a flag or a command


class Primary(FrozenModel):
    layer: Layer
    finding: str  # a Finding id


class ChainLink(FrozenModel):
    """One step of the causal chain, root first: e.g. memory: KV pressure → scheduling: queueing."""

    layer: Layer
    finding: str
    effect: str


class Unexplained(FrozenModel):
    """An SLO missed that no bottleneck explains: the miss, why, and what would tell."""

    line: str  # e.g. "TTFT p95 206 ms misses 200 ms; no layer explains it"
    missing: tuple[str, ...] = ()  # absent evidence, each with the flag or command for it


class SloResult(FrozenModel):
    name: str  # e.g. ttft_p95
    target: float
    measured: float | None
    unit: str
    passed: bool | None  # None when not measured


class JudgedWindow(FrozenModel):
    """The steady window an SLO was judged over, on the run's clock, and what it left out.

    `basis` is "steady" (sent from the level's first completion to its last send: a
    closed loop's first burst, sent before any request finished, is left out) or
    "whole level" (too short or too few requests for a steady window).
    """

    start_ts: float
    end_ts: float
    num_judged: int
    num_requests: int
    num_first_burst: int = 0  # sent before the window opened
    basis: Literal["steady", "whole level"] = "steady"

    def describe(self) -> str:
        """One line: 'judged 12.3–38.1 s: 412 of 460 requests (16 of the first burst …)'."""
        span = f"{self.start_ts:.1f}–{self.end_ts:.1f} s"
        if self.basis == "whole level":
            return (
                f"judged the whole level, {span}: all {self.num_judged} requests "
                "(too short a level for a steady window)"
            )
        burst = f"{self.num_first_burst} of the first burst, sent before any request finished"
        left_out = f"{burst}, excluded; " if self.num_first_burst else ""
        return (
            f"judged {span}: {self.num_judged} of {self.num_requests} requests "
            f"({left_out}the window ends at the last send, before the drain)"
        )


class LoggedRequest(FrozenModel):
    """One of the run's slowest requests and the server's log lines about it (`--log`)."""

    id: str  # the X-Request-Id it was sent with
    ttft_s: float | None
    e2e_s: float | None
    joined_by: Literal["id", "time"]  # its id in the lines, or only the lines of its time
    lines: tuple[str, ...] = ()


class Diagnosis(FrozenModel):
    schema_id: str = Field(default=DIAGNOSIS_SCHEMA, alias="schema")
    layers: tuple[LayerResult, ...]
    primary: Primary | None = None
    chain: tuple[ChainLink, ...] = ()
    slo: tuple[SloResult, ...] = ()
    client_bound: bool = False
    judged: JudgedWindow | None = None  # the window the client's SLO figures were judged over
    # can that window's sample carry the SLO claims (`loadgen.validity`); None: not judged
    validity: Validity | None = None
    # what the chain ends at: the SLOs missed, e.g. "TTFT p95 4.7 s (SLO 200 ms)"; "" if none
    symptom: str = ""
    unexplained: Unexplained | None = None  # a miss with no primary: said, never silent
    slowest: tuple[LoggedRequest, ...] = ()  # with `--log`: the slowest requests' log lines
    # with `--otlp-listen` or `--spans`: the server's request spans joined by trace id
    spans: SpanJoin | None = None

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _all_seven_layers(self) -> Diagnosis:
        if tuple(result.layer for result in self.layers) != LAYER_ORDER:
            raise ValueError("a diagnosis holds all seven layers, in order")
        if self.schema_id != DIAGNOSIS_SCHEMA:
            raise ValueError(f"unsupported diagnosis schema {self.schema_id!r}")
        return self

    def layer(self, layer: Layer) -> LayerResult:
        return self.layers[LAYER_ORDER.index(layer)]

    def to_json_dict(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)
