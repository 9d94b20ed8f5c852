"""The collect stage against the live twin: its vLLM names detected and normalised, DCGM too."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from infertriage.cli import main
from infertriage.twin.process import TwinProcess


@pytest.fixture(scope="module")
def twin() -> Iterator[TwinProcess]:
    with TwinProcess("kv-pressure", load_time_s=0.1) as process:
        yield process


def _load(url: str, num: int) -> None:
    def one(i: int) -> None:
        # prompts differ from the first token, or the prefix cache shares their blocks
        body = json.dumps({"prompt": f"r{i} " + "memory " * 600, "max_tokens": 200}).encode()
        request = urllib.request.Request(
            f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(num)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)


def _entries(document: dict[str, object]) -> dict[str, dict[str, object]]:
    entries = document.get("metrics") or document.get("entries") or []
    assert isinstance(entries, list)
    return {str(e["name"]): e for e in entries if isinstance(e, dict)}


def test_twin_metrics_are_detected_as_vllm(
    twin: TwinProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    _load(twin.url, 4)
    assert main(["metrics", twin.url, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert "vllm" in json.dumps(document.get("engine", document)).lower()
    text = json.dumps(document)
    for name in ("kv.usage", "queue.running", "server.ttft", "preemptions"):
        assert f'"{name}"' in text, name


def test_twin_dcgm_is_detected(twin: TwinProcess, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", f"{twin.url}/dcgm/metrics", "--json"]) == 0
    text = capsys.readouterr().out
    assert "dcgm" in text.lower()
    for name in ("gpu.util", "gpu.sm_active", "gpu.dram_active", "gpu.fb_used_bytes"):
        assert f'"{name}"' in text, name


def test_a_window_under_load_shows_preemptions(
    twin: TwinProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    loader = threading.Thread(target=_load, args=(twin.url, 24))
    loader.start()
    code = main(["metrics", twin.url, "--duration", "4s", "--json"])
    loader.join(timeout=90)
    assert code == 0
    with urllib.request.urlopen(f"{twin.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    preempted = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("vllm:num_preemptions")
    ]
    assert preempted and preempted[0] > 0
    assert json.loads(capsys.readouterr().out)
