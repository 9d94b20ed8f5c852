"""`infertriage topology` and `plan --nccl-tests`: screen, JSON, and user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
ARGS = ["topology", "--model", "llama-3.1-70b", "--gpu", "H100-SXM"]
TOPO = ["--nvidia-smi-topo", str(DATA / "nvidia_smi_topo_h100x8_nvswitch.txt")]
NCCL = ["--nccl-tests", str(DATA / "all_reduce_perf_h100x8_nvlink.txt")]


def test_topology_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, *TOPO, *NCCL, "--input-len", "1024", "--output-len", "256", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "infertriage.topology/v1"
    assert [t["tp"] for t in document["tp"]] == [2, 4, 8]
    assert document["tp"][2]["measured_ranks"] == 8 and document["tp"][2]["carries"] is True
    assert document["nccl_tests"][0]["nccl_tests_version"] == "2.17.9"
    assert len(document["links"]) == 28


def test_topology_on_screen(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, *NCCL]) == 0
    out = capsys.readouterr().out
    assert "bus bandwidth" in out and "TP=8:" in out and "measured on 8 ranks" in out


def test_topology_needs_a_file_and_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(ARGS) == 2
    assert "--nvidia-smi-topo" in capsys.readouterr().err
    assert main([*ARGS, "--nccl-tests", str(tmp_path / "none.txt")]) == 2
    assert "the nccl-tests file" in (err := capsys.readouterr().err) and "does not exist" in err


def test_plan_uses_the_measured_interconnect(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--tp", "8"]
    base += ["--concurrency", "64", "--input-len", "1024", "--output-len", "256", "--json"]
    assert main(base) == 0
    catalogue = json.loads(capsys.readouterr().out)["roofline"]
    assert main([*base, *TOPO, *NCCL]) == 0
    measured = json.loads(capsys.readouterr().out)["roofline"]
    assert measured["decode_comm_s"] > catalogue["decode_comm_s"]
    assert measured["itl_s"] > catalogue["itl_s"]
