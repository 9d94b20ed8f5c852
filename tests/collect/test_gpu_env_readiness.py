"""NVML (real values with a GPU, a clear note without), the environment snapshot, readiness."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
import pytest

from infertriage.collect import (
    Readiness,
    check_readiness,
    open_nvml,
    snapshot_environment,
    wait_until_ready,
)
from infertriage.schemas import UserError


def test_without_a_gpu_nvml_is_a_clear_note() -> None:
    sampler, note = open_nvml()
    if sampler is not None:
        sampler.close()
        pytest.skip("this machine has a GPU")
    assert note.endswith(".") and ("nvidia-ml-py" in note or "GPU" in note)


@pytest.mark.gpu
def test_nvml_reads_real_values() -> None:
    sampler, note = open_nvml()
    if sampler is None:
        pytest.skip(note)
    with sampler:
        assert sampler.devices, "NVML started but lists no device"
        values = sampler.sample()
        device = sampler.devices[0]
        driver = sampler.driver_version()
        cuda = sampler.cuda_version()
    by_name = {v.name: v.value for v in values if dict(v.labels)["gpu"] == "0"}
    assert device.memory_total_bytes > 1 << 30
    assert by_name["gpu.fb_total_bytes"] == device.memory_total_bytes
    assert (
        0 < by_name["gpu.fb_used_bytes"] + by_name["gpu.fb_free_bytes"] <= device.memory_total_bytes
    )
    assert 0.0 <= by_name["gpu.util"] <= 1.0
    assert by_name["gpu.power_watts"] > 1.0  # an idle data-centre GPU still draws tens of watts
    assert by_name["gpu.sm_clock_hz"] > 1e8
    assert driver and cuda and "." in cuda


def test_environment_snapshot() -> None:
    snapshot = snapshot_environment(engine="vllm", engine_version="0.10.1")
    document = snapshot.model_dump(mode="json")
    orjson.dumps(document)  # JSON-ready for run.json
    assert document["python"].count(".") == 2
    assert "aiohttp" in document["packages"] and "prometheus-client" in document["packages"]
    assert document["engine_version"] == "0.10.1"
    if not document["gpus"]:
        assert any("GPU" in note or "nvidia-ml-py" in note for note in document["notes"])


def _readiness(server: Any, model: str | None = None) -> Readiness:
    async def run() -> Readiness:
        async with aiohttp.ClientSession() as session:
            return await check_readiness(session, server.url, model=model, timeout_s=2.0)

    return asyncio.run(run())


MODELS = {"object": "list", "data": [{"id": "facebook/opt-125m"}]}


def test_ready_when_healthy_and_the_model_is_listed(live_server: Any) -> None:
    live_server.set("/health", "")
    live_server.set_json("/v1/models", MODELS)
    readiness = _readiness(live_server)
    assert readiness.ready and readiness.model == "facebook/opt-125m" and not readiness.problems


def test_not_ready_says_why(live_server: Any) -> None:
    live_server.set("/health", "loading", status=503)
    live_server.set_json("/v1/models", MODELS)
    readiness = _readiness(live_server, model="llama-3.1-8b")
    assert not readiness.ready
    assert readiness.health_status == 503
    assert any("503" in p for p in readiness.problems)
    assert any("'llama-3.1-8b' is not served" in p for p in readiness.problems)


def test_time_to_ready(live_server: Any) -> None:
    live_server.set_json("/v1/models", MODELS)
    opened = time.monotonic() + 0.4

    def health() -> tuple[int, str]:  # loading for 0.4 s, then healthy
        return (200, "") if time.monotonic() >= opened else (503, "loading")

    live_server.set("/health", make=health)

    async def run() -> Readiness:
        async with aiohttp.ClientSession() as session:
            return await wait_until_ready(session, live_server.url, timeout_s=5.0, poll_s=0.1)

    readiness = asyncio.run(run())
    assert readiness.ready and readiness.time_to_ready_s is not None
    assert 0.3 <= readiness.time_to_ready_s < 3.0


def test_never_ready_is_a_user_error(free_port: int) -> None:
    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            await wait_until_ready(
                session, f"http://127.0.0.1:{free_port}", timeout_s=0.3, poll_s=0.1
            )

    with pytest.raises(UserError, match=r"was not ready after 0\.3 s"):
        asyncio.run(run())
