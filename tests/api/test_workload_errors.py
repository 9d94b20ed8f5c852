"""Requests the server rejects (4xx) or refuses for load (429), against a real loopback server.

Every 10th request gets vLLM's HTTP 400 for a prompt past the context (the
`http_400` preset of `infertriage_testing.testserver`; for `diagnose`, which reads the
server's /metrics, a gateway in front of the real twin answers it), or a 429:
bench counts them apart from the server's errors; diagnose and validate stop
with exit 2 at more than 2 % rejected, naming the server's message and the
flag that fixes it; 429s become the admission signal and its warning, never
an error-rate bottleneck.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from infertriage.api.bench import run_bench
from infertriage.api.diagnose import diagnose
from infertriage.api.specs import BenchSpec, DiagnoseSpec
from infertriage.cli.app import main
from infertriage.schemas import RequestRecord, RunDir, Signal, Status, UserError
from infertriage.twin.process import TwinProcess
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

from ..loopback_proxy import Proxy

_WORKLOAD = "synthetic:input=16,output=8"
_FAST = Behavior(ttft_s=0.005, itl_s=0.001)
_CONTEXT_400 = (
    "This model's maximum context length is 2048 tokens. However, you requested 2310 tokens "
    "(2054 in the messages, 256 in the completion). Please reduce the length of the messages "
    "or completion."
)


class _Gateway(Proxy):
    """A gateway in front of the twin that answers every `every`-th generation itself."""

    def __init__(self, backend: str, every: int, status: int, message: str) -> None:
        super().__init__([backend], [1])
        self.every, self.status, self.message = every, status, message
        self.num_posts = 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "POST" and request.path.startswith("/v1/"):
            self.num_posts += 1
            if self.num_posts % self.every == 0:
                await request.read()
                error = {"object": "error", "message": self.message, "code": self.status}
                return web.json_response(error, status=self.status)
        return await super()._handle(request)


@pytest.fixture(scope="module")
def twin() -> Iterator[TwinProcess]:
    with TwinProcess("healthy", load_time_s=0.2) as process:
        yield process


def _diagnose_through(twin: TwinProcess, gateway: _Gateway, out: Path) -> int:
    gateway.start()
    try:
        return main(
            ["diagnose", "--url", gateway.url, "--metrics-url", f"{twin.url}/metrics",
             "--duration", "3", "--workload", _WORKLOAD, "--concurrency", "4",
             "--out", str(out)]
        )  # fmt: skip
    finally:
        gateway.stop()


@pytest.fixture
def rejecting() -> Iterator[str]:
    """Every 10th request answered HTTP 400 'This model's maximum context length…'."""
    with serve_in_thread(ServerConfig(behavior=_FAST, faults=((10, "http_400"),))) as (url, _):
        yield url


def test_bench_reports_rejected_requests_apart_from_the_servers_errors(
    rejecting: str, tmp_path: Path
) -> None:
    result = run_bench(
        BenchSpec(
            url=rejecting,
            concurrencies=(4,),
            num_requests=60,
            workload=_WORKLOAD,
            out=tmp_path / "run",
            check_tokens=False,
        )
    )
    summary = result.levels[0].summary
    assert summary.rejections.num_rejected == 6 and summary.num_ok == 54
    assert summary.num_failed == 0 and summary.error_rate == 0.0
    assert "rejected:http_4xx" not in dict(summary.errors)
    line = next(w for w in result.warnings if "rejected by the server as invalid" in w)
    assert "6 requests (10.0 %) rejected by the server as invalid: HTTP 400 'This model's " in line
    assert line.endswith("— fix: --max-model-len / a shorter --workload; not counted as errors.")
    records = list(RunDir.open(result.run_dir).iter_records(result.run_dir / "requests.jsonl",
                                                            RequestRecord))  # fmt: skip
    assert sum(r.error_kind.value == "rejected" and r.http_status == 400 for r in records) == 6


def test_bench_counts_429s_as_refused_for_load_not_as_errors(tmp_path: Path) -> None:
    config = ServerConfig(behavior=_FAST, faults=((5, "http_429"),))
    with serve_in_thread(config) as (url, _):
        result = run_bench(
            BenchSpec(
                url=url,
                concurrencies=(4,),
                num_requests=60,
                workload=_WORKLOAD,
                out=tmp_path / "run",
                check_tokens=False,
            )
        )
    summary = result.levels[0].summary
    assert summary.num_refused == 12 and summary.admission_rate == pytest.approx(0.2)
    assert summary.num_failed == 0 and summary.rejections.num_rejected == 0
    assert any("12 requests (20.0%) refused for load (HTTP 429" in w for w in result.warnings)


def test_a_key_refused_mid_run_stops_bench_after_the_level(tmp_path: Path) -> None:
    """/v1/models is open, generation is not: the preflight passes, every request gets a 401."""
    refused = Behavior(status=401, error_message="invalid API key")
    with serve_in_thread(ServerConfig(behavior=refused)) as (url, server):
        with pytest.raises(UserError) as caught:
            run_bench(
                BenchSpec(
                    url=url,
                    concurrencies=(2,),
                    num_requests=12,  # each user backs off 0.05 s doubling to 1 s after each
                    workload=_WORKLOAD,
                    out=tmp_path / "run",
                    check_tokens=False,
                )
            )
        assert server.num_requests == 12  # one level, not the next
    assert str(caught.value) == (
        "the server refused every request of level concurrency=2 (HTTP 401 'invalid API key'): "
        "check --api-key."
    )


def test_diagnose_stops_with_exit_2_when_over_2_percent_is_rejected(
    twin: TwinProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway = _Gateway(twin.url, 10, 400, _CONTEXT_400)
    code = _diagnose_through(twin, gateway, tmp_path / "run")
    err = capsys.readouterr().err
    assert code == 2
    assert "%, over 2.0 %) were rejected by the server as invalid" in err
    assert "HTTP 400 'This model's maximum context length is 2048 tokens." in err
    assert "fix it with --max-model-len / a shorter --workload." in err
    assert "Traceback" not in err


def test_validate_stops_with_exit_2_when_over_2_percent_is_rejected(
    rejecting: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["validate", "--url", rejecting, "--rate", "20", "--duration", "2s", "--workload",
         _WORKLOAD, "--skip-functional", "--out", str(tmp_path / "run")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "were rejected by the server as invalid, most with HTTP 400" in err
    assert "fix it with --max-model-len / a shorter --workload." in err


def test_429s_are_the_admission_signal_not_errors(twin: TwinProcess, tmp_path: Path) -> None:
    gateway = _Gateway(twin.url, 5, 429, "Too many requests: rate limit reached")
    assert _diagnose_through(twin, gateway, tmp_path / "run") == 0
    result = diagnose(DiagnoseSpec(from_run=tmp_path / "run"))
    run = RunDir.open(tmp_path / "run")
    signals = {s.name: s.value for s in run.iter_records(run.signals, Signal)}
    # one request in five refused; the judged window holds a few dozen, so about 0.2
    assert signals["client.admission_rate"] == pytest.approx(0.2, abs=0.1)
    assert signals["client.error_rate"] == 0.0 and signals["client.num_errors"] == 0
    assert signals["client.rejected_rate"] == 0.0
    findings = {f.id: f for layer in result.diagnosis.layers for f in layer.findings}
    assert "application.error_rate" not in findings
    refused = findings["application.admission_control"]
    assert refused.status is Status.WARNING and "(HTTP 429)" in refused.title
    assert result.diagnosis.primary is None or result.diagnosis.primary.layer.value != (
        "application"
    )
