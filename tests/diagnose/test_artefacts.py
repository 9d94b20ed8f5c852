"""evidence.metric_artefact (diagnose.rules.artefacts): a value that cannot be true is said as the
metric's fault, in the layer of its metric, and never drives a bottleneck."""

from __future__ import annotations

import pytest

from infertriage.diagnose import RULES, Evidence, diagnose_evidence
from infertriage.schemas import Layer, Signal, Status, Thresholds
from infertriage.schemas.artefacts import ARTEFACT_KINDS, artefact_name, split_artefact

from .evidence_helpers import make_evidence

RULE = RULES["evidence.metric_artefact"]
SLOW = {"client__ttft_p95_s": 0.9, "client__itl_p95_s": 0.12}


def _with(*found: Signal, **overrides: float | None) -> Evidence:
    return make_evidence(**overrides).merged(found)


def _artefact(kind: str, metric: str, value: float, source: str, unit: str = "1") -> Signal:
    return Signal(artefact_name(kind, metric), value, unit, source, (0.0, 0.0))


KV = _artefact(
    "artefact.fraction_above_one",
    "kv.usage",
    97.0,
    'vllm:kv_cache_usage_perc{engine="0"} reads 97',
    "fraction",
)
WAITING = _artefact(
    "artefact.negative_gauge",
    "queue.waiting",
    -3.0,
    'vllm:num_requests_waiting{engine="1"} reads -3',
    "requests",
)


def test_the_text_says_which_metric_which_value_why_and_what_instead() -> None:
    finding = RULE.fn(_with(KV), Thresholds())
    assert finding is not None and finding.layer is Layer.MEMORY
    assert 'vllm:kv_cache_usage_perc{engine="0"} reads 97' in finding.title
    assert "kv.usage 97 (that is 9700%)" in finding.explanation
    assert ARTEFACT_KINDS["artefact.fraction_above_one"] in finding.explanation
    assert any("GPU KV cache usage" in step for step in finding.next_steps)
    assert [item.signal for item in finding.evidence] == ["artefact.fraction_above_one:kv.usage"]


@pytest.mark.parametrize(
    ("found", "layer"),
    [
        (WAITING, Layer.SCHEDULING),
        (KV, Layer.MEMORY),
        (
            _artefact("artefact.histogram_count_mismatch", "server.itl", 2.0, "itl"),
            Layer.APPLICATION,
        ),
        (
            _artefact("artefact.negative_gauge", "", -1.0, "log line 12: Running: -1"),
            Layer.SCHEDULING,
        ),
    ],
    ids=["queue", "kv", "itl histogram", "bare kind from a log"],
)
def test_the_finding_lands_in_the_layer_of_its_metric(found: Signal, layer: Layer) -> None:
    finding = RULE.fn(_with(found), Thresholds())
    assert finding is not None and finding.layer is layer


def test_several_artefacts_are_one_finding_in_the_first_kinds_layer() -> None:
    more = [
        _artefact("artefact.negative_counter", f"tokens.{n}", -1.0, f"c{n} reads -1")
        for n in ("prompt", "generation", "prompt_rate")
    ]
    finding = RULE.fn(_with(KV, WAITING, *more), Thresholds())
    assert finding is not None and finding.layer is Layer.SCHEDULING  # negative gauges first
    assert finding.title.endswith("; and 2 more")
    assert len(finding.evidence) == 5


def test_it_never_drives_a_bottleneck_even_when_the_slos_are_missed() -> None:
    finding = RULE.fn(_with(KV, **SLOW), Thresholds())
    assert finding is not None
    assert finding.status is Status.WARNING and finding.explains == 0 and finding.score == 0
    diagnosis = diagnose_evidence(_with(KV, **SLOW), Thresholds())
    assert diagnosis.primary is None or diagnosis.primary.finding != RULE.id


def test_a_signal_set_aside_says_so_among_the_missing_evidence() -> None:
    evidence = _with(KV, kv__usage_max=None, kv__usage_mean=None)
    memory = diagnose_evidence(evidence, Thresholds()).layer(Layer.MEMORY)
    line = next(line for line in memory.missing if line.startswith("kv.usage_max:"))
    assert "cannot be true and was set aside" in line and "reads 97" in line


def test_names_round_trip_and_others_are_not_artefacts() -> None:
    assert split_artefact("artefact.negative_gauge:queue.waiting") == (
        "artefact.negative_gauge",
        "queue.waiting",
    )
    assert split_artefact("artefact.negative_gauge") == ("artefact.negative_gauge", "")
    assert split_artefact("kv.usage_max") is None
    with pytest.raises(KeyError):
        artefact_name("artefact.not_a_kind", "kv.usage")
