"""llama.cpp's llama-server (build 11434, a 2-layer random GGUF) under bench, metrics,
diagnose and validate. Each set-up's outcome is declared in its test before it runs.

The model emits only words, never end-of-sequence, so every request runs to max_tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from infertriage.schemas import SAMPLE_VALIDITY

Cli = Callable[[list[str]], tuple[int, Any]]
_LIGHT = "synthetic:input=100,output=32"


def _findings(diagnosis: dict[str, Any]) -> dict[str, str]:
    return {f["id"]: layer["status"] for layer in diagnosis["layers"] for f in layer["findings"]}


def test_light_load_no_bottleneck_and_validate_passes(
    llama: ModuleType, cli: Cli, tmp_path: Path
) -> None:
    # Declared: 2 streams on 4 slots is light — no layer is a bottleneck; validate passes.
    with llama.serve(port=0, np=4) as server:
        code, view = cli(["metrics", server.url])
        assert code == 0 and view["engine"] == "llamacpp"
        code, bench = cli(
            ["bench", "--url", server.url, "--concurrency", "2", "--num-requests", "30",
             "--workload", _LIGHT, "--out", str(tmp_path / "bench")]
        )  # fmt: skip
        level = bench["levels"][0]
        assert code == 0 and level["completed"] == 30 and level["failed"] == 0
        code, diagnosis = cli(
            ["diagnose", "--url", server.url, "--concurrency", "2", "--duration", "20",
             "--workload", _LIGHT, "--server-pid", str(server.pid), "--out", str(tmp_path / "d")]
        )  # fmt: skip
        assert code == 0
        assert diagnosis["primary"] is None, _findings(diagnosis)
        # /slots told the collector how many slots there are.
        run = json.loads((tmp_path / "d" / "run.json").read_text())
        assert run["server_config"]["max_num_seqs"] == 4
        code, checklist = cli(
            ["validate", "--url", server.url, "--concurrency", "2", "--duration", "10s",
             "--soak", "10s", "--workload", _LIGHT, "--server-pid", str(server.pid),
             "--out", str(tmp_path / "v")]
        )  # fmt: skip
        failed = {c["name"]: c["detail"] for c in checklist["checks"] if c["status"] == "fail"}
        # a short CPU run may judge too few requests for a p95 claim: INVALID, never ready
        assert set(failed) <= {SAMPLE_VALIDITY}, failed
        assert code == (1 if failed else 0) and checklist["ready"] == (not failed)


def test_one_slot_under_concurrent_load_is_scheduling(
    llama: ModuleType, cli: Cli, tmp_path: Path
) -> None:
    # Declared: -np 1 with 8 streams of 512 tokens — requests wait for the only slot:
    # primary scheduling (llama.cpp has no latency histograms: judged by its slots).
    # Sized so the wait breaks the 200 ms TTFT target on any machine: one request holds
    # the slot ~0.1 s on a fast core (0.054 s for 256 tokens, measured), so 7 waiting
    # streams mean ~0.7 s; 4 streams of 256 tokens gave 0.19 s, under the target, on a
    # fast machine — a healthy verdict there, and the test failed on one CI run.
    with llama.serve(port=0, np=1) as server:
        code, diagnosis = cli(
            ["diagnose", "--url", server.url, "--concurrency", "8", "--duration", "20",
             "--workload", "synthetic:input=100,output=512", "--server-pid", str(server.pid),
             "--out", str(tmp_path / "d")]
        )  # fmt: skip
    assert code == 0
    assert diagnosis["primary"]["layer"] == "scheduling", _findings(diagnosis)
    assert diagnosis["primary"]["finding"] == "scheduling.queue_dominates_ttft"


def test_one_slot_per_core_at_high_concurrency_from_one_worker(
    llama: ModuleType, cli: Cli, tmp_path: Path
) -> None:
    # Declared as the issue asks: client_bound or application, whichever the evidence
    # supports. Measured on the 2-core dev machine (np 2, 64 streams, one worker): the
    # client used ~20-30 % of a core with a loop lag of a few ms — not bound — while 62
    # requests waited for the 2 slots: the evidence supports neither; it is scheduling.
    # The test states those figures rather than an outcome the run does not show.
    with llama.serve(port=0, np=2) as server:
        code, diagnosis = cli(
            ["diagnose", "--url", server.url, "--concurrency", "64", "--duration", "20",
             "--workload", "synthetic:input=100,output=256", "--server-pid", str(server.pid),
             "--out", str(tmp_path / "d")]
        )  # fmt: skip
    assert code == 0
    run = json.loads((tmp_path / "d" / "run.json").read_text())
    main = run["summary"]["main_level"]
    lines = (tmp_path / "d" / "signals.jsonl").read_text().splitlines()
    signals = [json.loads(line) for line in lines]
    values = {s["name"]: s["value"] for s in signals}
    assert diagnosis["client_bound"] is False and values["client.bound"] == 0.0, main
    assert values["queue.waiting_max"] >= 30 and values["config.max_num_seqs"] == 2
    assert diagnosis["primary"]["layer"] == "scheduling", _findings(diagnosis)
