"""engines, level 0½: the shape of an engine's metric table (pure data).

A `MetricTable` is, for each normalised name of the vocabulary, the raw
`/metrics` names that carry it in one engine (newest first, older
generations after), the factor to SI units, a label filter, or why the
engine has no such metric. `collect.adapters.adapt` applies a table to a
scrape; the tables themselves live with their engine (`engines.vllm`, …).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from infertriage.schemas import VOCABULARY, MetricKind

__all__ = [
    "ENGINE_DOMAIN",
    "PD_DOMAIN",
    "PD_ROLES",
    "Labels",
    "MetricMap",
    "MetricTable",
    "Product",
    "Source",
    "metric",
]

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Source:
    """One raw metric that carries a normalised one.

    `raw` is the sample name for scalars (`vllm:num_preemptions_total`) and
    the family's base name for histograms (`vllm:time_to_first_token_seconds`).
    """

    raw: str
    scale: float = 1.0  # raw unit → SI (MiB → bytes, µs → s, percent → fraction)
    where: Labels = ()  # only samples with these label values
    from_label: str | None = None  # the value is this label of an info metric
    note: str = ""  # e.g. "vLLM V0 name"

    @property
    def display(self) -> str:
        """The raw name as shown and kept in the `raw` label, with its filter or label."""
        text = self.raw
        if self.where:
            text += "{" + ",".join(f'{k}="{v}"' for k, v in self.where) + "}"
        if self.from_label:
            text += f".{self.from_label}"
        return text


@dataclass(frozen=True, slots=True)
class MetricMap:
    name: str
    sources: tuple[Source, ...]
    note: str = ""  # a caveat shown whatever the status
    enable: str = ""  # how to make it appear when it is absent


def metric(name: str, *sources: str | Source, note: str = "", enable: str = "") -> MetricMap:
    """A mapping row; plain strings are sources with no scaling or filter."""
    if name not in VOCABULARY:
        raise KeyError(f"{name} is not in the vocabulary")
    made = tuple(Source(s) if isinstance(s, str) else s for s in sources)
    return MetricMap(name, made, note, enable)


@dataclass(frozen=True, slots=True)
class Product:
    """A name derived as the product of two others, when the engine does not export it."""

    name: str
    left: str
    right: str


@dataclass(frozen=True)
class MetricTable:
    """One exporter's metric names (an engine's, or dcgm-exporter's)."""

    engine: str  # vllm, sglang, tgi, trtllm_triton, triton, llamacpp, dcgm
    title: str
    prefixes: tuple[str, ...]
    domain: frozenset[str]
    mappings: tuple[MetricMap, ...]
    unsupported: Mapping[str, str] = field(default_factory=dict)  # name → why
    notes: tuple[str, ...] = ()
    products: tuple[Product, ...] = ()
    # the label that tells data-parallel ranks apart (vLLM V1 `engine`, SGLang `dp_rank`):
    # each rank's series is its own engine's state, never one rank of a sum
    rank_label: str = ""
    # labels that only say which process exported a copy of one value (Prometheus'
    # multiprocess mode exports a gauge per process with `pid`): equal copies count once
    copy_labels: tuple[str, ...] = ("pid",)
    # labels that name an instance's prefill/decode role (SGLang's own `engine_type`; for
    # vLLM a pod label Prometheus relabelled onto its series): the first present, its value
    # one of `PD_ROLES`' keys, is copied into the label `pd_role`
    role_labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        mapped = {m.name for m in self.mappings}
        if not mapped <= self.domain:
            raise ValueError(f"{self.engine}: mapped names outside the domain")


# a role label's value → the normalised role (`unified`, llm-d's `both`: not disaggregated)
PD_ROLES: Mapping[str, str] = {"prefill": "prefill", "decode": "decode"}

ENGINE_DOMAIN: frozenset[str] = frozenset(
    name
    for name, definition in VOCABULARY.items()
    if definition.kind is not MetricKind.EVENT
    and name.split(".")[0]
    in {"queue", "kv", "preemptions", "prefix_cache", "tokens", "requests", "server", "spec", "ep"}
) | {"proc.rss_bytes", "proc.start_time_s", "proc.cpu_seconds"}

# prefill/decode disaggregation (the KV connector's transfers, the P/D queues): engines that
# run disaggregated add it to their domain
PD_DOMAIN: frozenset[str] = frozenset(
    name for name in VOCABULARY if name.split(".")[0] in {"kv_transfer", "pd"}
)
