"""`diagnose --metrics-file` on what operators paste: a dump cut at its end, indented or with
Windows line ends; data-parallel ranks; copies per process; values that cannot be true.
End to end through `diagnose_metrics_file` and the CLI, on the hand-made dumps of
tests/data/metrics_dumps (see its README), real incident pastes (tests/data/incidents) and
the real captures of ../shared/fixtures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from infertriage.api.diagnose import diagnose_metrics_file
from infertriage.cli import main
from infertriage.schemas import Layer, Status, Thresholds

DUMPS = Path(__file__).parents[1] / "data" / "metrics_dumps"
INCIDENTS = Path(__file__).parents[1] / "data" / "incidents"


def _findings(document: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {f["id"]: f for layer in document["layers"] for f in layer["findings"]}


def _excerpt(case: str, tmp_path: Path) -> Path:
    path = tmp_path / "paste.prom"
    path.write_text((INCIDENTS / case).read_text().partition("\n# ---\n")[2])
    return path


def test_a_real_capture_cut_mid_line_is_read_with_notes(
    shared_fixture: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = shared_fixture("metrics/vllm.txt").read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: text.index('vllm:time_to_first_token_seconds_bucket{le="0.5"') + 30])
    result = diagnose_metrics_file(cut, Thresholds())
    assert any("cut at its end" in note for note in result.notes)
    assert result.diagnosis.layer(Layer.SCHEDULING).status is Status.OK  # its gauges were read
    assert main(["diagnose", "--metrics-file", str(cut), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["schema"] == "infertriage.diagnosis/v1"
    assert "note: " in err and "was cut at its end" in err


def test_a_pasted_dp_dump_cut_in_its_last_histogram_still_names_the_rank(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Indented, Windows line ends, cut inside engine 1's +Inf bucket."""
    path = DUMPS / "vllm_pasted_cut.txt"
    assert main(["diagnose", "--metrics-file", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["primary"]["finding"] == "parallelism.dp_rank_imbalance"
    assert err.count("note: ") == 2 and "1 of its series were cut" in err


@pytest.mark.parametrize(
    ("dump", "primary"),
    [
        ("vllm_dp2_one_rank_queues.txt", "parallelism.dp_rank_imbalance"),
        ("sglang_dp2_tp_copies.txt", "parallelism.dp_rank_imbalance"),
        ("vllm_dp2_balanced.txt", None),
    ],
)
def test_data_parallel_ranks_are_judged_apart(dump: str, primary: str | None) -> None:
    result = diagnose_metrics_file(DUMPS / dump, Thresholds())
    found = result.diagnosis.primary
    assert (found.finding if found else None) == primary
    parallelism = result.diagnosis.layer(Layer.PARALLELISM)
    assert parallelism.status is (Status.BOTTLENECK if primary else Status.OK)


def test_the_dp_finding_gives_each_ranks_figures(capsys: pytest.CaptureFixture[str]) -> None:
    path = DUMPS / "vllm_dp2_one_rank_queues.txt"
    assert main(["diagnose", "--metrics-file", str(path), "--json"]) == 0
    finding = _findings(json.loads(capsys.readouterr().out))["parallelism.dp_rank_imbalance"]
    assert finding["status"] == "bottleneck"
    assert "rank 0 (64 running, 30 waiting, KV 97% used)" in finding["title"]
    assert "rank 1 (2 running, 0 waiting, KV 5% used)" in finding["title"]
    evidence = {item["signal"]: item["value"] for item in finding["evidence"]}
    assert evidence["dp.running_by_rank.0"] == 64 and evidence["dp.running_by_rank.1"] == 2


def test_a_real_dp_collapse_onto_engine_0_is_parallelism(tmp_path: Path) -> None:
    """vLLM issue #48808 (DP=4, stale load-balancer stats): the thread's cause is the routing."""
    result = diagnose_metrics_file(
        _excerpt("vllm/001-dp-engine-load-imbalance.txt", tmp_path), Thresholds()
    )
    assert result.diagnosis.primary is not None
    assert result.diagnosis.primary.finding == "parallelism.dp_rank_imbalance"


def test_copies_per_process_are_read_once_and_said(capsys: pytest.CaptureFixture[str]) -> None:
    path = DUMPS / "vllm_api_server_pid_copies.txt"
    result = diagnose_metrics_file(path, Thresholds())
    assert any("12 was used once, not added up to 36" in note for note in result.notes)
    assert result.diagnosis.primary is None
    assert main(["diagnose", "--metrics-file", str(path)]) == 0
    assert "not added up to 36" in capsys.readouterr().err


def test_impossible_values_are_the_metrics_fault_and_drive_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = DUMPS / "vllm_impossible_values.txt"
    assert main(["diagnose", "--metrics-file", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["primary"] is None
    assert all(layer["status"] != "bottleneck" for layer in document["layers"])
    finding = _findings(document)["evidence.metric_artefact"]
    assert finding["status"] == "warning" and finding["explains"] == 0
    signals = {item["signal"] for item in finding["evidence"]}
    assert signals == {
        "artefact.negative_gauge:queue.waiting",
        "artefact.fraction_above_one:kv.usage",
        "artefact.fraction_above_one:prefix_cache.hit_rate",
        "artefact.histogram_count_mismatch:server.ttft",
    }
    assert "reads -3" in finding["title"] and "cannot be below zero" in finding["explanation"]
    # KV usage 97 (a fraction by definition) did not make a full cache: it was set aside
    memory = next(layer for layer in document["layers"] if layer["layer"] == "memory")
    assert all(f["id"] != "memory.kv_pressure" for f in memory["findings"])
    assert any("set aside" in line for line in memory["missing"])


def test_a_real_kv_gauge_per_api_server_pid_is_an_artefact(tmp_path: Path) -> None:
    """vLLM PR #28792: the gauge once per pid, all but one 0.0; the thread: the metric's bug."""
    result = diagnose_metrics_file(
        _excerpt("vllm/002-kv-usage-gauge-per-api-server-pid.txt", tmp_path), Thresholds()
    )
    assert result.diagnosis.primary is None
    memory = result.diagnosis.layer(Layer.MEMORY)
    (finding,) = memory.findings
    assert finding.id == "evidence.metric_artefact" and "8 copies" in finding.title


def test_text_with_nothing_readable_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cut.txt"
    path.write_text('vllm:num_requests_waiting{engine="0",model_na')
    assert main(["diagnose", "--metrics-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not valid Prometheus metrics text" in err and len(err.strip().splitlines()) == 1
