"""collect, level 2: Prometheus text → samples, with prometheus-client's parser.

Takes the text of one `/metrics` response (or file) and gives an
`Exposition`: every sample with its labels, indexed by sample name, and the
declared type of each family. A dump pasted from an incident is read for what
it holds: a byte-order mark, indentation and Windows line ends are accepted,
lines of `...` (what the operator left out) are skipped; a last line cut
mid-way, and the series of a histogram at the very end cut before its `+Inf`
bucket or its `_count`, are left out with a note. Text that
is not Prometheus exposition (HTML, JSON, garbage), empty, or holds a
histogram cut short before other families (a malformed file, not a cut
paste) is a `UserError` of one sentence.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from infertriage.schemas import UserError
from infertriage.schemas.inputs import clip

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

__all__ = ["Exposition", "RawSample", "parse_metrics_text", "read_metrics_file"]

Labels = tuple[tuple[str, str], ...]
MAX_METRICS_BYTES = 16 * 1024 * 1024  # a server's /metrics is some kilobytes to a megabyte
_QUOTED_CHARS = 80  # of a line or a parser's message quoted in an error sentence


@dataclass(frozen=True, slots=True)
class RawSample:
    """One line of the exposition: sample name (with `_total`, `_bucket`…), labels, value."""

    name: str
    labels: Labels
    value: float

    def label(self, key: str) -> str | None:
        for name, value in self.labels:
            if name == key:
                return value
        return None


@dataclass(frozen=True)
class Exposition:
    """A parsed scrape: samples by name, family types, and notes on what looked odd.

    `get` finds a counter under its name with or without `_total`.
    """

    source: str
    samples: tuple[RawSample, ...]
    family_types: Mapping[str, str]  # family name → counter, gauge, histogram, summary, unknown
    notes: tuple[str, ...] = ()
    by_name: Mapping[str, tuple[RawSample, ...]] = field(default_factory=dict)

    def get(self, name: str) -> tuple[RawSample, ...]:
        return self.by_name.get(name, ())

    def has(self, name: str) -> bool:
        return name in self.by_name

    @property
    def names(self) -> frozenset[str]:
        """Sample names as the parser gives them (counters always end in `_total`)."""
        return frozenset(sample.name for sample in self.samples)


def _what_it_is(text: str) -> str | None:
    head = text.lstrip()[:200].lower()
    if head.startswith(("<!doctype", "<html", "<?xml", "<")):
        return "HTML, not Prometheus metrics text (is this the server's /metrics URL?)"
    if head.startswith(("{", "[")):
        return "JSON, not Prometheus metrics text (is this the server's /metrics URL?)"
    return None


def _short(message: str) -> str:
    return clip(" ".join(str(message).split()), _QUOTED_CHARS)


_PARSE_ERRORS = (ValueError, TypeError, IndexError, KeyError)
_PARSER_ALONE = "_infertriage_prometheus_text"  # the parser's modules, loaded on their own


@functools.cache
def _text_parser() -> Callable[[str], Iterable[Metric]]:
    """prometheus-client's `text_string_to_metric_families`.

    Its package's `__init__` imports the whole client (an HTTP server, urllib, the
    collectors, a registry): about 35 ms of CPU, a tenth of `metrics FILE`, none of which
    reading text needs. So unless the package is loaded already, the parser's own modules
    (parser, metrics_core, samples, validation: relative imports among themselves) are
    loaded from the installed package's folder under a private name, without that
    `__init__`: the same code, run the same way. A layout this does not know (an older
    client, a zipped install) takes the package's own import."""
    if "prometheus_client" not in sys.modules:
        spec = importlib.util.find_spec("prometheus_client")
        where = spec.submodule_search_locations if spec is not None else None
        if where:
            package = types.ModuleType(_PARSER_ALONE)
            package.__path__ = list(where)
            sys.modules.setdefault(_PARSER_ALONE, package)
            try:
                parser = importlib.import_module(f"{_PARSER_ALONE}.parser")
            except ImportError:
                pass
            else:
                found: Callable[[str], Iterable[Metric]] = parser.text_string_to_metric_families
                return found
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    return text_string_to_metric_families


def _missing_part(family: str, index: Mapping[str, list[RawSample]]) -> str | None:
    """What a histogram family lacks that its end holds (None: complete)."""
    buckets = index.get(f"{family}_bucket")
    if not buckets:
        return None
    if not any(s.label("le") == "+Inf" for s in buckets):
        return "no +Inf bucket"
    if f"{family}_count" not in index:
        return "no _count"
    return None


def _check_histograms(
    source: str, index: Mapping[str, list[RawSample]], types: Mapping[str, str]
) -> None:
    for family, kind in types.items():
        missing = _missing_part(family, index) if kind == "histogram" else None
        if missing is not None:
            raise UserError(f"{source} looks truncated: histogram {family} has {missing}.")


def _series_key(sample: RawSample) -> Labels:
    return tuple((k, v) for k, v in sample.labels if k != "le")


def _cut_series(family: str, samples: list[RawSample]) -> set[Labels]:
    """The label sets of a histogram family whose `+Inf` bucket or `_count` is missing."""
    mine = [s for s in samples if s.name in (f"{family}_bucket", f"{family}_count")]
    buckets = {_series_key(s) for s in mine if s.name.endswith("_bucket")}
    closed = {_series_key(s) for s in mine if s.label("le") == "+Inf"}
    counted = {s.labels for s in mine if s.name.endswith("_count")}
    return {key for key in buckets if key not in closed or key not in counted}


def _drop_cut_histogram(
    source: str, samples: list[RawSample], types: dict[str, str], trailing: str | None
) -> tuple[list[RawSample], tuple[str, ...]]:
    """Leave out the series of the text's last family that a cut left without their end.

    A paste cut at its end stops inside the last family; a histogram there lacks its
    `+Inf` bucket or `_count` (or one rank's series does). Elsewhere that is malformed.
    """
    if trailing is None or types.get(trailing) != "histogram":
        return samples, ()
    cut = _cut_series(trailing, samples)
    if not cut:
        return samples, ()
    parts = {f"{trailing}_{part}" for part in ("bucket", "count", "sum", "created")}
    kept = [s for s in samples if s.name not in parts or _series_key(s) not in cut]
    if not any(s.name in parts for s in kept):
        types.pop(trailing)
        return kept, (
            f"{source} ends inside histogram {trailing}, cut before its +Inf bucket or "
            "_count: it was left out.",
        )
    return kept, (
        f"{source} ends inside histogram {trailing}: {len(cut)} of its series were cut before "
        "their end (no +Inf bucket or _count) and were left out.",
    )


def _last_line(text: str) -> tuple[str, str]:
    """The text up to its last non-blank line, and that line."""
    body = text.rstrip()
    cut = body.rfind("\n")
    return body[: cut + 1], body[cut + 1 :].strip()


_ELISIONS = frozenset({"...", "…", "[...]", "[…]"})  # lines a paste leaves out, marked


def _without_elisions(text: str, source: str) -> tuple[str, tuple[str, ...]]:
    """The text without the lines an operator wrote for what they left out (`...`)."""
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if line.strip() not in _ELISIONS]
    if len(kept) == len(lines):
        return text, ()
    skipped = len(lines) - len(kept)
    return "".join(kept), (
        f"{source}: {skipped} line(s) reading '...' (left out when it was pasted) were skipped.",
    )


def _read_families(text: str, source: str) -> tuple[list[Metric], tuple[str, ...]]:
    """The text's families; a last line that cannot be read (a paste cut mid-line) is
    left out with a note, so only text with nothing readable before it is refused."""
    try:
        return list(_text_parser()(text)), ()
    except _PARSE_ERRORS as err:
        refused = UserError(f"{source} is not valid Prometheus metrics text ({_short(str(err))}).")
        first: Exception = err
    head, last = _last_line(text)
    try:
        families = list(_text_parser()(head)) if head.strip() else []
    except _PARSE_ERRORS:
        families = []
    if not any(family.samples for family in families):
        raise refused from first
    note = (
        f"{source} was cut at its end: its last line (`{_short(last)}`) cannot be read and "
        "was left out."
    )
    return families, (note,)


def _flatten(families: list[Metric]) -> tuple[list[RawSample], dict[str, str]]:
    samples: list[RawSample] = []
    types: dict[str, str] = {}
    for family in families:
        types[str(family.name)] = str(family.type)
        for parsed in family.samples:
            labels = tuple(sorted((str(k), str(v)) for k, v in parsed.labels.items()))
            samples.append(RawSample(str(parsed.name), labels, float(parsed.value)))
    return samples, types


def _alias_counters(index: dict[str, list[RawSample]], types: Mapping[str, str]) -> None:
    # The parser renames a counter `x` to `x_total` (the OpenMetrics form); engines such as
    # Triton, TGI and dcgm-exporter name counters without `_total`, so both names must find it.
    for family, kind in types.items():
        if kind == "counter" and f"{family}_total" in index:
            index.setdefault(family, index[f"{family}_total"])


def read_metrics_file(path: Path) -> str:
    """A saved scrape's text; a `UserError` when it cannot be read as text (binary, a folder,
    a FIFO) or is larger than `MAX_METRICS_BYTES` (read no further).

    UTF-8, or UTF-16 with its byte-order mark (what Windows PowerShell's `>` writes)."""
    if path.exists() and not path.is_file():  # a FIFO would wait for a writer
        raise UserError(f"cannot read {path}: it is not a regular file.")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_METRICS_BYTES + 1)
        wide = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        if len(data) > MAX_METRICS_BYTES:
            raise UserError(
                f"{path} is larger than {MAX_METRICS_BYTES >> 20} MiB; a scrape of a server's "
                "/metrics is at most a few megabytes."
            )
        text = data.decode("utf-16" if wide else "utf-8")
        return text.replace("\r\n", "\n").replace("\r", "\n")  # as a text-mode read gives
    except UnicodeDecodeError as err:
        raise UserError(f"{path} is not a text file of Prometheus metrics.") from err
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}.") from err


def parse_metrics_text(text: str, source: str) -> Exposition:
    """Parse exposition text; `source` (a URL or a path) names it in errors and notes."""
    text = text.removeprefix("\ufeff")  # a byte-order mark: a dump saved on Windows
    if not text.strip():
        raise UserError(f"{source} returned no metrics (the text is empty).")
    kind = _what_it_is(text)
    if kind is not None:
        raise UserError(f"{source} returned {kind}.")
    text, elided = _without_elisions(text, source)
    families, cut = _read_families(text, source)
    samples, types = _flatten(families)
    trailing = next((str(f.name) for f in reversed(families) if f.samples), None)
    samples, dropped = _drop_cut_histogram(source, samples, types, trailing)
    if not samples:
        raise UserError(f"{source} returned no metrics (only comments).")
    index: dict[str, list[RawSample]] = {}
    for sample in samples:
        index.setdefault(sample.name, []).append(sample)
    _check_histograms(source, index, types)
    _alias_counters(index, types)
    notes = (*elided, *cut, *dropped)
    if not text.endswith(("\n", "\r")) and not (cut or dropped):
        notes += (f"{source} does not end with a newline, as the format requires: it may be cut.",)
    return Exposition(
        source=source,
        samples=tuple(samples),
        family_types=types,
        notes=notes,
        by_name={name: tuple(group) for name, group in index.items()},
    )
