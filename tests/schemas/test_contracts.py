"""Contract types: layers, statuses, diagnosis invariants, thresholds, units, vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from infertriage import schemas
from infertriage.schemas import (
    DIAGNOSIS_SCHEMA,
    LAYER_ORDER,
    VOCABULARY,
    Diagnosis,
    Finding,
    Layer,
    LayerResult,
    MetricKind,
    Primary,
    Status,
    Thresholds,
    UserError,
    load_thresholds,
    parse_bytes,
    parse_duration,
)


def test_seven_layers_and_five_statuses() -> None:
    assert [layer.value for layer in LAYER_ORDER] == [
        "hardware",
        "kernel",
        "memory",
        "scheduling",
        "parallelism",
        "speculative",
        "application",
    ]
    assert {s.value for s in Status} == {"ok", "warning", "bottleneck", "unknown", "n/a"}


def test_public_names_are_pinned() -> None:
    assert "Diagnosis" in schemas.__all__ and "UserError" in schemas.__all__
    for name in schemas.__all__:
        assert hasattr(schemas, name), name


def _finding(severity: float = 0.8, explains: float = 0.5) -> Finding:
    return Finding(
        id="memory.kv_pressure",
        layer=Layer.MEMORY,
        status=Status.BOTTLENECK,
        severity=severity,
        explains=explains,
        score=severity * explains,
        title="KV cache full",
    )


def _diagnosis(**overrides: object) -> Diagnosis:
    layers = tuple(LayerResult(layer=layer, status=Status.OK) for layer in LAYER_ORDER)
    fields: dict[str, object] = {"layers": layers}
    fields.update(overrides)
    return Diagnosis.model_validate(fields)


def test_diagnosis_json_has_schema_id_and_round_trips() -> None:
    diagnosis = _diagnosis(primary=Primary(layer=Layer.MEMORY, finding="memory.kv_pressure"))
    document = diagnosis.to_json_dict()
    assert document["schema"] == DIAGNOSIS_SCHEMA
    assert len(document["layers"]) == 7  # type: ignore[arg-type]
    assert Diagnosis.model_validate(document) == diagnosis


def test_diagnosis_needs_all_seven_layers_in_order() -> None:
    with pytest.raises(ValidationError, match="all seven layers"):
        _diagnosis(layers=(LayerResult(layer=Layer.MEMORY, status=Status.OK),))


def test_finding_score_is_severity_times_explains() -> None:
    assert _finding().score == pytest.approx(0.4)
    with pytest.raises(ValidationError, match="severity"):
        Finding(
            id="x",
            layer=Layer.KERNEL,
            status=Status.WARNING,
            severity=0.5,
            explains=0.5,
            score=0.5,
            title="t",
        )


def test_threshold_defaults_follow_design() -> None:
    t = Thresholds()
    assert (t.ttft_p95_s, t.itl_p95_s, t.error_rate) == (0.2, 0.05, 0.001)
    assert (t.gpu_memory_headroom, t.sm_active, t.dram_active_decode) == (0.1, 0.8, 0.7)
    assert (t.tensor_active_prefill, t.alert_ttft_p95_s) == (0.9, 0.5)


def test_inline_slo_overrides() -> None:
    t = load_thresholds("ttft_p95=300ms,itl_p95=0.04,error_rate=1%")
    assert t.ttft_p95_s == pytest.approx(0.3)
    assert t.itl_p95_s == pytest.approx(0.04)
    assert t.error_rate == pytest.approx(0.01)


def test_slo_file(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text("ttft_p95: 1s\nprofile: batch\n")
    t = load_thresholds(str(path))
    assert t.ttft_p95_s == 1.0 and t.profile == "batch"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ttft=1s", "unknown SLO 'ttft'"),
        ("ttft_p95", "is not KEY=VALUE"),
        ("ttft_p95=fast", "invalid value 'fast'"),
        ("missing.yaml", "does not exist"),
    ],
)
def test_bad_slo_is_one_sentence(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_thresholds(spec)


def test_units() -> None:
    assert parse_duration("200ms") == pytest.approx(0.2)
    assert parse_duration("2m") == 120.0
    assert parse_duration("5", default_unit="ms") == pytest.approx(0.005)
    assert parse_bytes("1GiB") == 2**30
    assert parse_bytes("3.35TB") == 3_350_000_000_000
    with pytest.raises(UserError, match="unknown time unit"):
        parse_duration("3 parsecs")


def test_vocabulary_names_units_and_kinds() -> None:
    for name in ("queue.waiting", "kv.usage", "preemptions", "server.ttft", "gpu.sm_active"):
        assert name in VOCABULARY
    assert VOCABULARY["server.ttft"].kind is MetricKind.HISTOGRAM
    assert VOCABULARY["server.ttft"].unit == "s"
    assert VOCABULARY["kv.usage"].unit == "fraction"
    assert VOCABULARY["preemptions"].kind is MetricKind.COUNTER
    assert all(d.name == key for key, d in VOCABULARY.items())
