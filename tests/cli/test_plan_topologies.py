"""`plan --rate/--num-gpus/--offload-gb`: xPyD, DP/TP/EP, PP and offload in JSON and on screen,
and their flags' ranges refused in one sentence."""

from __future__ import annotations

import json

import pytest

from infertriage.cli import main

ARGS = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--concurrency", "16"]
LONG = ["--input-len", "4000", "--output-len", "500", "--slo", "ttft_p95=1s,itl_p95=12ms"]


def test_json_holds_each_topology(capsys: pytest.CaptureFixture[str]) -> None:
    sized = ["--num-gpus", "8", "--rate", "60", "--offload-gb", "100", "--prefix-reuse", "0.8"]
    code = main([*ARGS, *LONG, *sized, "--kv-link-gb-s", "50", "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    split = document["disaggregated"]
    assert split["winner"] == "disaggregated"
    assert split["gpus"] < split["colocated_gpus"]
    assert split["kv_link"] == {"bandwidth_bytes_per_s": 50e9, "latency_s": 0.002}
    pools = split["prefill"]["pool"], split["decode"]["pool"]
    assert split["gpus"] == sum(pool["gpus"] for pool in pools)
    assert split["slo"]["itl_s"] == 0.012
    layout = document["layout"]
    assert layout["num_gpus"] == 8 and layout["pick"] in {o["name"] for o in layout["options"]}
    assert document["pipeline"] is None  # an 8B model fits one node
    offload = document["offload"]
    assert offload["pays"] is True and offload["prefix_tokens"] == 3200
    assert offload["max_saved_s_per_s"] > 0


def test_without_the_flags_nothing_new_is_sized(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["disaggregated"] is None and document["offload"] is None
    assert document["layout"] is None and document["pipeline"] is None


def test_short_prompts_at_a_low_rate_on_screen(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*ARGS, "--input-len", "128", "--output-len", "128", "--rate", "0.5"])
    assert code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "disaggregated: 1P1D, 2 GPUs, vs colocated 1 × TP1 = 1 GPU → colocated" in out


def test_a_model_beyond_one_node_shows_its_pipeline(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama-3.1-405b", "--gpu", "H100-SXM", "--concurrency", "16"]
    code = main([*args, "--tp", "8", "--pp", "2", "--input-len", "2000", "--output-len", "300"])
    assert code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Pipeline: TP 8 × PP 2" in out
    assert "micro-batches" in out


@pytest.mark.parametrize(
    ("extra", "sentence"),
    [
        (["--prefix-reuse", "1.5"], "--prefix-reuse must be 0 or more and at most 1, not 1.5."),
        (["--kv-link-gb-s", "0"], "--kv-link-gb-s must be a positive number, not 0."),
        (["--rate", "-1"], "--rate must be a positive number, not -1."),
        (["--offload-gb", "10"], "--offload-gb needs --prefix-reuse"),
        (["--rate", "2"], "--rate sizes prefill and decode: give --input-len and --output-len"),
    ],
)
def test_bad_values_are_one_sentence(
    extra: list[str], sentence: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*ARGS, *extra]) == 2
    assert sentence in " ".join(capsys.readouterr().err.split())
