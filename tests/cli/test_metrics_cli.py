"""`infertriage metrics URL|FILE`: real captures, a live server, and every way it can go wrong."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from infertriage.cli import main


class _Server:
    """A real aiohttp server on 127.0.0.1 in its own thread, serving fixed paths."""

    def __init__(self, routes: dict[str, tuple[int, str, str]]) -> None:
        self.routes = routes
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._runner: web.AppRunner | None = None
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    async def _handle(self, request: web.Request) -> web.Response:
        status, body, content_type = self.routes.get(request.path, (404, "404", "text/plain"))
        return web.Response(status=status, text=body, content_type=content_type)

    async def _start(self) -> int:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        assert site._server is not None
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        assert self._runner is not None
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture
def vllm_text(shared_fixture) -> str:  # type: ignore[no-untyped-def]
    return str(shared_fixture("metrics/vllm.txt").read_text())


@pytest.fixture
def vllm_server(vllm_text: str) -> Iterator[_Server]:
    models = json.dumps({"data": [{"id": "facebook/opt-125m", "max_model_len": 2048}]})
    server = _Server(
        {
            "/metrics": (200, vllm_text, "text/plain"),
            "/v1/models": (200, models, "application/json"),
            "/version": (200, '{"version": "0.10.1"}', "application/json"),
            "/html/metrics": (200, "<html><body>login</body></html>", "text/html"),
        }
    )
    try:
        yield server
    finally:
        server.close()


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("infertriage: error: ") and lines[0].endswith(".")
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0]


@pytest.mark.parametrize(
    ("name", "title"),
    [
        ("vllm", "vLLM"),
        ("sglang", "SGLang"),
        ("tgi", "TGI"),
        ("llamacpp", "llama.cpp"),
        ("triton", "Triton"),
        ("trtllm_triton", "TensorRT-LLM"),
        ("dcgm", "dcgm"),
    ],
)
def test_every_capture_on_screen(
    shared_fixture, capsys: pytest.CaptureFixture[str], name: str, title: str
) -> None:  # type: ignore[no-untyped-def]
    path = shared_fixture(f"metrics/{name}.txt")
    assert main(["metrics", str(path)]) == 0
    out = capsys.readouterr().out
    assert title in out and "present" in out


def test_json_of_a_file_is_one_document(shared_fixture, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert main(["metrics", str(shared_fixture("metrics/dcgm.txt")), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "infertriage.metrics/v1"
    assert document["engine"] is None and document["exporters"] == ["dcgm"]
    sm = next(m for m in document["metrics"] if m["name"] == "gpu.sm_active")
    assert sm["status"] == "present" and sm["value"] == 0.0  # zero, not absent
    nvlink = next(m for m in document["metrics"] if m["name"] == "gpu.nvlink_tx_bytes")
    assert nvlink["status"] == "absent" and nvlink["value"] is None


def test_live_url_one_scrape_with_server_config(
    vllm_server: _Server, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["metrics", vllm_server.url + "/v1", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["engine"] == "vllm" and document["window"] is None
    assert document["source"] == vllm_server.url + "/metrics"
    config = document["server_config"]
    assert config["max_model_len"] == 2048 and config["version"] == "0.10.1"
    assert config["num_gpu_blocks"] == 7281
    ttft = next(m for m in document["metrics"] if m["name"] == "server.ttft")
    p99 = next(q for q in ttft["histogram"]["quantiles"] if q["q"] == 0.99)
    assert (p99["lower"], p99["upper"]) == (0.25, 0.5)


def test_live_url_over_a_window(vllm_server: _Server, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", vllm_server.url, "--duration", "0.4s", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["window"]["duration_s"] >= 0.35 and document["num_scrapes"] >= 2
    tokens = next(m for m in document["metrics"] if m["name"] == "tokens.generation")
    assert tokens["window"] == {"increase": 0.0, "rate_per_s": 0.0, "num_resets": 0}
    running = next(m for m in document["metrics"] if m["name"] == "queue.running")
    assert running["window"]["max"] == 0.0


def test_live_url_on_screen(vllm_server: _Server, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", vllm_server.url, "--duration", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "vLLM" in out and "over the window" in out and "max_model_len=2048" in out


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty"),
        ("garbage that is not metrics at all\n", "not valid Prometheus metrics text"),
        ('vllm:num_requests_running{model_name="fa', "not valid Prometheus metrics text"),
        ("<!DOCTYPE html><html></html>", "HTML"),
    ],
)
def test_bad_files_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, needle: str
) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(content)
    assert main(["metrics", str(path)]) == 2
    assert needle in _error_line(capsys)


def test_a_capture_cut_at_its_end_is_read_with_notes(
    vllm_text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copy cut short (mid-line, inside a histogram) shows what it holds and says what
    was left out; only text with nothing readable is refused (tests/collect/test_parse.py)."""
    path = tmp_path / "cut.txt"
    path.write_text(vllm_text[: vllm_text.index('le="1.0",model_name') + 40])
    assert main(["metrics", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    notes = " ".join(document["notes"])
    assert "was cut at its end" in notes and "left out" in notes


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", str(tmp_path / "nope.txt")]) == 2
    assert "neither a URL" in _error_line(capsys)


def test_duration_needs_a_url(shared_fixture, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert main(["metrics", str(shared_fixture("metrics/vllm.txt")), "--duration", "5s"]) == 2
    assert "--duration needs a URL" in _error_line(capsys)


def test_refused_connection_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["metrics", f"http://127.0.0.1:{port}"]) == 2
    assert "connection refused" in _error_line(capsys)


def test_wrong_url_exits_2(vllm_server: _Server, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", vllm_server.url + "/not-metrics"]) == 2
    line = _error_line(capsys)
    assert "HTTP 404" in line and "--enable-metrics" in line
    assert main(["metrics", vllm_server.url + "/html/metrics"]) == 2
    assert "HTML" in _error_line(capsys)


def test_unknown_host_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "http://no-such-host.invalid:8000"]) == 2
    assert "no-such-host.invalid" in _error_line(capsys)


def test_bad_duration_exits_2(vllm_server: _Server, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", vllm_server.url, "--duration", "soon"]) == 2
    assert "soon" in _error_line(capsys)
