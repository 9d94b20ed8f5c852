"""monitor-config through the api and the command line: thresholds from `--slo`, from a run
and from a saved baseline (a real bench run against the twin); the files; user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from infertriage.analyze.stats.latency import summarize
from infertriage.api.bench import run_bench
from infertriage.api.monitor import monitor_config
from infertriage.api.runview import measured_view
from infertriage.api.specs import BenchSpec, MonitorConfigSpec
from infertriage.cli import main
from infertriage.schemas import BaselineStore, RunDir
from infertriage.twin.process import TwinProcess

FILES = {
    "recording_rules.yml",
    "alert_rules.yml",
    "alertmanager.yml",
    "grafana_dashboard.json",
    "rules_test.yml",
    "README.md",
}


def _alerts(folder: Path) -> dict[str, dict[str, object]]:
    groups = yaml.safe_load((folder / "alert_rules.yml").read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


@pytest.fixture(scope="module")
def twin_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bench run of 4 users for 3 s against the healthy twin."""
    out = tmp_path_factory.mktemp("bench") / "run"
    with TwinProcess("healthy", load_time_s=0.2) as twin:
        run_bench(
            BenchSpec(
                url=twin.url,
                concurrencies=(4,),
                duration_s=3.0,
                workload="synthetic:input=256,output=64",
                out=out,
            )
        )
    return out


@pytest.mark.slow
def test_thresholds_come_from_a_saved_baseline_and_from_the_run_alike(
    twin_run: Path, tmp_path: Path
) -> None:
    measured = summarize(measured_view(RunDir.open(twin_run)).records)
    assert measured.ttft is not None and measured.itl is not None
    store = tmp_path / "store"
    BaselineStore(store).save("twin-healthy", RunDir.open(twin_run))
    spec = MonitorConfigSpec(
        engine="vllm", out=tmp_path / "b", baseline="twin-healthy", store=store
    )
    result = monitor_config(spec)
    limits = result.config.limits
    assert limits.origin == "baseline 'twin-healthy'"
    assert limits.ttft_p95_s == pytest.approx(measured.ttft.p95 * 1.5)
    assert limits.itl_p95_s == pytest.approx(measured.itl.p95 * 1.5)
    assert limits.min_throughput_tok_s == pytest.approx(measured.output_throughput * 0.8)
    alerts = _alerts(tmp_path / "b")
    floor = alerts["InferTriageThroughputBelowBaseline"]
    assert f"< {limits.min_throughput_tok_s:.6g}" in str(floor["expr"])
    assert f"> {limits.ttft_p95_s:.6g}" in str(alerts["InferTriageTTFTHigh"]["expr"])
    again = {"baseline": None, "from_run": twin_run, "force": True}
    from_run = monitor_config(spec.model_copy(update=again))
    assert from_run.config.limits.ttft_p95_s == limits.ttft_p95_s
    assert {p.name for p in result.written} == FILES


def test_defaults_slo_and_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    args = ["monitor-config", "--engine", "sglang", "--out", str(out)]
    assert main([*args, "--slo", "alert_ttft_p95=300ms,ttft_p95=150ms", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "infertriage.monitor-config/v1"
    assert document["engine"] == "sglang" and document["thresholds_from"] == "--slo"
    assert {Path(p).name for p in document["files"]} == FILES
    ttft = next(a for a in document["alerts"] if a["alert"] == "InferTriageTTFTHigh")
    assert ttft["threshold"] == pytest.approx(0.3) and ttft["for_s"] == 300
    assert "preemptions" in {lo["why"].split()[0].lower() for lo in document["left_out"]} or any(
        "retract" in lo["why"] for lo in document["left_out"]
    )
    # every alert's runbook names its layer and the infertriage command to run next
    for rule in _alerts(out).values():
        runbook = rule["annotations"]["runbook"]  # type: ignore[index]
        assert runbook.startswith(f"layer: {rule['labels']['layer']}. Next: infertriage ")  # type: ignore[index]
    readme = (out / "README.md").read_text()
    assert "infertriage:waiting_requests:per_replica" in readme and "promtool test rules" in readme


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--from-run", "x", "--baseline", "y"], "not both"),
        (["--baseline", "nope"], "no baseline 'nope'"),
        (["--rate-window", "0"], "--rate-window"),
        (["--engine", "tensorflow"], "tensorflow"),
    ],
)
def test_user_errors_are_one_sentence(
    extra: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["monitor-config", "--engine", "vllm", "--out", str(tmp_path / "m")]
    code = main([*args, "--store", str(tmp_path / "store"), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and says in err and "\n" not in err, err


def test_existing_files_need_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["monitor-config", "--engine", "llamacpp", "--out", str(tmp_path)]
    assert main(args) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(args) == 2
    assert "--force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
