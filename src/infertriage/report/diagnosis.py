"""report, level 4: the seven-layer bottleneck map on screen (rich) and as JSON.

The SLO line says when the sample it was judged on is INVALID, and why
(`Diagnosis.validity`). Titles, caveats and next steps may quote the server (its configuration, a
model name): every string reaches rich as data (`schemas.text`).
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infertriage.schemas import Diagnosis, EvidenceItem, Finding, LayerResult, Status, Validity
from infertriage.schemas.spans import SpanJoin
from infertriage.schemas.text import show_controls, terminal_text

__all__ = ["diagnosis_to_json", "evidence_text", "evidence_value", "render_diagnosis", "slo_value"]

_STYLE = {
    Status.OK: "green",
    Status.WARNING: "yellow",
    Status.BOTTLENECK: "bold red",
    Status.UNKNOWN: "dim",
    Status.NOT_APPLICABLE: "dim",
}


def diagnosis_to_json(diagnosis: Diagnosis) -> dict[str, object]:
    return diagnosis.to_json_dict()


def evidence_value(item: EvidenceItem) -> str:
    """An evidence item's value on screen: ms, %, yes/no, or the number."""
    unit, value = item.unit, item.value
    if unit == "s":  # a latency in ms; a stall or a queue time of minutes in seconds
        return f"{value:,.0f} s" if value >= 10 else f"{value * 1e3:.1f} ms"
    if unit == "fraction":
        return f"{value:.0%}"
    if unit == "bool":
        return "yes" if value else "no"
    if unit == "s/token":  # CPU a streamed token costs: tens to thousands of µs
        return f"{value * 1e6:,.0f} µs/token"
    if unit == "cores":
        return f"{value:,.0f} cores" if float(value).is_integer() else f"{value:.2f} cores"
    if float(value).is_integer() and abs(value) < 1e12:
        return f"{value:,.0f}"  # 1,000, not 1e+03
    return f"{value:,.3g}"


def _threshold(item: EvidenceItem) -> str:
    if item.threshold is None:
        return ""
    probe = item.model_copy(update={"value": item.threshold})
    return f" (limit {evidence_value(probe)})"


def evidence_text(finding: Finding) -> str:
    """Up to three evidence items, each with the threshold its rule applied."""
    return "; ".join(f"{e.signal} {evidence_value(e)}{_threshold(e)}" for e in finding.evidence[:3])


def _layer_cell(result: LayerResult, primary: str | None) -> Text:
    text = Text()
    for finding in result.findings[:2]:
        marker = "▶ " if finding.id == primary else ""
        style = _STYLE[finding.status]
        text.append(f"{marker}{show_controls(finding.title)}\n", style=style)
        text.append(f"  {show_controls(evidence_text(finding))}\n", style="dim")
        if finding.caveat:
            text.append(f"  caveat: {show_controls(finding.caveat)}\n", style="yellow")
        if finding.next_steps:
            text.append(f"  → {show_controls(finding.next_steps[0])}\n")
    if not result.findings and result.missing:
        text.append(f"missing: {show_controls(result.missing[0])}", style="dim")
    return text


def render_diagnosis(diagnosis: Diagnosis, console: Console, *, title: str = "") -> None:
    primary = diagnosis.primary.finding if diagnosis.primary else None
    table = Table(
        title=terminal_text(title or "Bottleneck map"), title_justify="left", show_lines=True
    )
    table.add_column("layer", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("findings, evidence and next step")
    for result in diagnosis.layers:
        status = Text(result.status.value, style=_STYLE[result.status])
        name = (
            f"▶ {result.layer.value}"
            if diagnosis.primary and (diagnosis.primary.layer is result.layer)
            else result.layer.value
        )
        table.add_row(terminal_text(name), status, _layer_cell(result, primary))
    parts: list[Table | Text] = [table]
    parts.append(_summary(diagnosis))
    if diagnosis.slowest:
        parts.append(_slowest(diagnosis))
    if diagnosis.spans is not None:
        parts.append(_spans(diagnosis.spans))
    console.print(Group(*parts))


def _ms(value: float | None) -> str:
    return "n/a" if value is None else slo_value(value, "s")


def _spans(join: SpanJoin) -> Text:
    """The server's request spans beside the client's TTFT (`--otlp-listen`, `--spans`)."""
    text = Text(f"{join.describe().capitalize()}; slowest first:\n", style="bold")
    for r in join.slowest:
        text.append(
            f"  {show_controls(r.id)}: client TTFT {_ms(r.client_ttft_s)}, server TTFT "
            f"{_ms(r.server_ttft_s)} (queue {_ms(r.queue_s)}, prefill {_ms(r.prefill_s)}), "
            f"{_ms(r.ttft_gap_s)} in front of the engine; decode {_ms(r.decode_s)}\n"
        )
    return text


def _slowest(diagnosis: Diagnosis) -> Text:
    """The slowest requests with the server's log lines about them (`--log`)."""
    how = "by its id" if diagnosis.slowest[0].joined_by == "id" else "by time (no line names one)"
    text = Text(f"Slowest requests in the server's log, joined {how}:\n", style="bold")
    for request in diagnosis.slowest:
        ttft = "n/a" if request.ttft_s is None else slo_value(request.ttft_s, "s")
        e2e = "n/a" if request.e2e_s is None else slo_value(request.e2e_s, "s")
        text.append(f"  {show_controls(request.id)}: TTFT {ttft}, E2E {e2e}\n")
        for line in request.lines or ("(no line)",):
            text.append(f"    {show_controls(line[:160])}\n", style="dim")
    return text


def _validity_lines(validity: Validity, text: Text) -> None:
    """'VALID sample: <its first claim>', or 'INVALID sample: <why>; <what would fix it>'."""
    claims = [check for check in validity.checks if check.name.startswith("sample")]
    if validity.valid and claims:
        text.append(f"  VALID sample: {show_controls(claims[0].figure)}\n", style="dim")
    for check in validity.failed:
        is_sample = check.name.startswith("sample")
        line = f"sample: {check.figure}; {check.fix}" if is_sample else check.line()
        text.append(f"  INVALID {show_controls(line)}\n", style="red")


def _summary(diagnosis: Diagnosis) -> Text:
    text = Text()
    slo = ", ".join(
        f"{r.name} {'n/a' if r.measured is None else slo_value(r.measured, r.unit)}"
        f" {'✓' if r.passed else '✗' if r.passed is not None else ''}"
        for r in diagnosis.slo
    )
    validity = diagnosis.validity
    invalid = " — INVALID sample" if validity is not None and not validity.valid else ""
    text.append(f"SLOs: {show_controls(slo)}")
    text.append(f"{invalid}\n", style="red")
    if diagnosis.judged is not None:
        text.append(f"  {show_controls(diagnosis.judged.describe())}\n", style="dim")
    if validity is not None:
        _validity_lines(validity, text)
    caveats = sorted({f.caveat for r in diagnosis.layers for f in r.findings if f.caveat}, key=len)
    if caveats:  # the shortest is the reason itself; the others say what it made a warning
        text.append(
            f"Caveat: {show_controls(caveats[0])}; rerun the load from another host.\n",
            style="yellow",
        )
    if diagnosis.client_bound:
        text.append("The load client fell behind: its figures are not trustworthy.\n", style="red")
    if diagnosis.primary is None:
        _no_primary(diagnosis, text)
        return text
    text.append("Primary bottleneck: ", style="bold")
    text.append(
        f"{diagnosis.primary.layer.value} ({show_controls(diagnosis.primary.finding)})\n",
        style="bold red",
    )
    links = [link.finding for link in diagnosis.chain]
    if diagnosis.symptom:
        links.append(diagnosis.symptom)
    if len(links) > 1:
        text.append(f"Chain: {show_controls(' → '.join(links))}\n")
    return text


def _no_primary(diagnosis: Diagnosis, text: Text) -> None:
    unexplained = diagnosis.unexplained
    if unexplained is not None:
        text.append(f"No primary: {show_controls(unexplained.line)}.\n", style="yellow")
        for line in unexplained.missing[:6]:
            text.append(f"  missing: {show_controls(line)}\n", style="dim")
        return
    missed = [r.name for r in diagnosis.slo if r.passed is False]
    if missed:
        text.append(
            f"No bottleneck found, but {', '.join(missed)} missed its SLO: read the warnings "
            "and the missing evidence.\n",
            style="yellow",
        )
    elif diagnosis.slo and all(r.measured is None for r in diagnosis.slo):
        text.append(
            "No bottleneck in the evidence at hand; no SLO was measured (read the warnings and "
            "the missing evidence).\n",
            style="yellow",
        )
    else:
        text.append("No bottleneck: every SLO holds.\n", style="green")


def slo_value(value: float, unit: str) -> str:
    """An SLO's target or measured value on screen: ms or a percentage."""
    return f"{value * 1e3:.0f} ms" if unit == "s" else f"{value:.2%}"
