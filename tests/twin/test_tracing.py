"""The twin's request spans: vLLM's `llm_request` with vLLM's attributes, sent by the
OpenTelemetry SDK's real OTLP/HTTP exporter to our receiver, parented on the traceparent."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.collect.otlp_receiver import OtlpReceiver
from infertriage.engines.vllm_spans import REQUEST_SPAN, SERVER_KIND, VllmSpan
from infertriage.schemas.spans import ServerSpan
from infertriage.twin.process import TwinProcess

TRACES = [(f"{i + 1:032x}", f"{i + 17:016x}") for i in range(3)]


@pytest.fixture
def traced_twin(tmp_path: Path) -> Iterator[tuple[TwinProcess, OtlpReceiver]]:
    with (
        OtlpReceiver("127.0.0.1", 0, tmp_path / "spans.jsonl") as receiver,
        TwinProcess("healthy", load_time_s=0.2, otlp_endpoint=receiver.endpoint) as twin,
    ):
        yield twin, receiver


def _stream(url: str, request_id: str, traceparent: str | None) -> dict[str, int]:
    """One streamed chat request; gives its usage."""
    body = {
        "messages": [{"role": "user", "content": "Say something about queues."}],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
    if traceparent is not None:
        headers["traceparent"] = traceparent
    request = urllib.request.Request(
        f"{url}/v1/chat/completions", data=json.dumps(body).encode(), headers=headers
    )
    usage: dict[str, int] = {}
    with urllib.request.urlopen(request, timeout=30) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("data: {"):
                usage = json.loads(line[6:]).get("usage") or usage
    return usage


def _wait_for(receiver: OtlpReceiver, count: int) -> list[ServerSpan]:
    deadline = time.monotonic() + 20
    while len(receiver.spans()) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return receiver.spans()


def test_each_request_s_span_carries_vllm_s_attributes_under_its_traceparent(
    traced_twin: tuple[TwinProcess, OtlpReceiver],
) -> None:
    twin, receiver = traced_twin
    usages = {
        trace: _stream(twin.url, f"req-{n}", f"00-{trace}-{parent}-01")
        for n, (trace, parent) in enumerate(TRACES)
    }
    untraced = _stream(twin.url, "plain", None)
    spans = _wait_for(receiver, len(TRACES) + 1)
    by_trace = {s.trace_id: s for s in spans}
    for n, (trace, parent) in enumerate(TRACES):
        span = by_trace[trace]
        assert (span.name, span.kind, span.parent_span_id) == (REQUEST_SPAN, SERVER_KIND, parent)
        assert span.service == "infertriage-twin"
        assert span.attributes[VllmSpan.REQUEST_ID] == f"chatcmpl-req-{n}"
        assert span.attributes[VllmSpan.PROMPT_TOKENS] == usages[trace]["prompt_tokens"]
        assert span.attributes[VllmSpan.COMPLETION_TOKENS] == usages[trace]["completion_tokens"]
        assert span.attributes[VllmSpan.MAX_TOKENS] == 8
        queue, prefill = (
            span.number(VllmSpan.TIME_IN_QUEUE),
            span.number(VllmSpan.TIME_IN_MODEL_PREFILL),
        )
        decode, ttft = (
            span.number(VllmSpan.TIME_IN_MODEL_DECODE),
            span.number(VllmSpan.TIME_TO_FIRST_TOKEN),
        )
        e2e = span.number(VllmSpan.E2E)
        assert queue is not None and prefill is not None and decode is not None
        assert ttft is not None and e2e is not None
        assert queue >= 0 and prefill > 0 and decode >= 0
        assert ttft == pytest.approx(queue + prefill)  # vLLM's: arrival → scheduled → token
        assert e2e >= ttft + decode - 1e-9
        assert span.end_ns - span.start_ns == pytest.approx(e2e * 1e9, abs=1e3)
    # without a traceparent, the span starts a trace of its own (a root)
    [root] = [s for s in spans if s.trace_id not in usages]
    assert root.parent_span_id == "" and root.attributes[VllmSpan.REQUEST_ID] == "chatcmpl-plain"
    assert root.attributes[VllmSpan.COMPLETION_TOKENS] == untraced["completion_tokens"]


def test_the_twin_without_the_option_never_imports_the_sdk() -> None:
    code = (
        "import sys, infertriage.api.diagnose\n"
        "from infertriage.twin.scenario import load_scenario\n"
        "from infertriage.twin.server import make_app\n"
        "make_app(load_scenario('healthy'))\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
