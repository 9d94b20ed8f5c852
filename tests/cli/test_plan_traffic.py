"""`plan --traffic`: on screen, as JSON, the HPA file, and a bad CSV as exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from infertriage.cli import main

ARGS = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM"]


def _curve(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "day.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_traffic_json_hpa_and_costs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    curve = _curve(
        tmp_path,
        "time,requests_per_s,input_tokens,output_tokens\n00:00,3,512,256\n"
        "08:00,70,1024,256\n16:00,20,512,256\n",
    )
    hpa = tmp_path / "hpa.yaml"
    args = [*ARGS, "--traffic", str(curve), "--gpu-hour-cost", "4", "--spot-cost", "1.5"]
    code = main([*args, "--cold-start", "400", "--hpa", str(hpa), "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    traffic = document["traffic"]
    # the replica count follows the cost model: each interval's replicas carry its rate
    replicas = [i["replicas"] for i in traffic["intervals"]]
    peak = max(replicas)
    assert replicas[0] == replicas[2] == 1 and replicas[1] == peak >= 2
    for interval in traffic["intervals"]:
        capacity = interval["replicas"] * interval["per_replica"]["requests_per_s"]
        assert capacity >= interval["requests_per_s"], interval
    assert traffic["peak"] == {"time": "08:00", "replicas": peak}
    auto, fixed = traffic["autoscaled"], traffic["fixed_at_peak"]
    assert fixed["gpu_hours_per_day"] == 24 * peak
    assert auto["gpu_hours_per_day"] < fixed["gpu_hours_per_day"]
    assert auto["cost_per_day"] == pytest.approx(auto["gpu_hours_per_day"] * 4)
    assert traffic["spot"]["interruptions_per_replica_hour"] == 0.05
    assert traffic["scale_down_window_s"] == 400
    manifest = yaml.safe_load(hpa.read_text(encoding="utf-8"))
    assert manifest["spec"]["maxReplicas"] == peak
    assert manifest["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 400
    assert (
        document["inputs"]["concurrency"] == traffic["intervals"][1]["per_replica"]["concurrency"]
    )


def test_traffic_on_screen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    curve = _curve(tmp_path, "time,requests_per_s\n0,3\n3600,60\n")
    code = main([*ARGS, "--traffic", str(curve), "--input-len", "512", "--output-len", "200"])
    assert code == 0
    out = capsys.readouterr().out
    assert "Replicas over the traffic curve" in out and "Fixed fleet for the peak" in out
    assert "no cold start measured" in out


def test_a_bad_curve_is_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    curve = _curve(tmp_path, "time,requests_per_s\n0,3\n60,three\n")
    assert main([*ARGS, "--traffic", str(curve), "--input-len", "512", "--output-len", "200"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "day.csv line 3" in err[0]
    missing = tmp_path / "none.csv"
    assert main([*ARGS, "--traffic", str(missing)]) == 2
    assert "the traffic curve" in (said := capsys.readouterr().err) and "does not exist" in said
