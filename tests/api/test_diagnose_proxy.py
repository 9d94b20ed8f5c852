"""diagnose through a gateway that cuts every stream after 2 s: `application.stream_cut` fires.

A real aiohttp reverse proxy runs in a process of its own on 127.0.0.1 in front
of the real twin: it forwards every request and streams the answer chunk by
chunk, and when given a cut time it drops the connection that long after the
request arrived (as a gateway's read timeout does), without ending the chunked
body. `diagnose` drives load through the proxy while it reads the twin's own
/metrics and /dcgm/metrics directly. Generations last ~1,000 tokens, several
seconds on the twin, well beyond the cut. Run as a script, this file is the proxy:

    python tests/api/test_diagnose_proxy.py UPSTREAM_URL CUT_S   (CUT_S 0: never cut)
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import ClientSession, ClientTimeout, web

from infertriage.api.diagnose import diagnose
from infertriage.api.specs import DiagnoseSpec
from infertriage.schemas import Diagnosis, Layer, RequestRecord, RunDir
from infertriage.twin.process import TwinProcess

_READY = "proxy listening on "
_CUT_S = 2.0
_WORKLOAD = "synthetic:input=64,output=1000"  # ~1,000 tokens: several seconds a stream
_DURATION_S = 7.0
_CONCURRENCY = 4  # few streams: the proxy, the client and the twin share two busy cores
_HOP_BY_HOP = frozenset({"connection", "content-length", "host", "keep-alive", "transfer-encoding"})


# ---- the proxy (runs in its own process) ------------------------------------------------


async def _forward(request: web.Request) -> web.StreamResponse:
    app = request.app
    deadline = asyncio.get_running_loop().time() + app["cut_s"]
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
    session: ClientSession = app["session"]
    async with session.request(
        request.method,
        app["upstream"] + request.path_qs,
        data=await request.read(),
        headers=headers,
    ) as upstream:
        response = web.StreamResponse(status=upstream.status)
        if "Content-Type" in upstream.headers:
            response.headers["Content-Type"] = upstream.headers["Content-Type"]
        await response.prepare(request)
        cut = asyncio.timeout_at(deadline) if app["cut_s"] > 0 else contextlib.nullcontext()
        try:
            async with cut:
                async for data in upstream.content.iter_any():
                    await response.write(data)
        except TimeoutError:
            # the gateway's read timeout: the connection goes, the chunked body never ends
            if request.transport is not None:
                request.transport.abort()
            return response
        await response.write_eof()
        return response


async def _serve(upstream: str, cut_s: float) -> None:
    app = web.Application()
    app["upstream"], app["cut_s"] = upstream.rstrip("/"), cut_s
    app.router.add_route("*", "/{tail:.*}", _forward)
    async with ClientSession(timeout=ClientTimeout(total=None)) as session:
        app["session"] = session
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        print(f"{_READY}http://127.0.0.1:{port}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()


@contextlib.contextmanager
def cutting_proxy(upstream: str, cut_s: float) -> Iterator[str]:
    """This file run as a proxy to `upstream` that drops each connection `cut_s` after its
    request; yields its URL (test_operations uses it as a gateway too)."""
    command = [sys.executable, str(Path(__file__).resolve()), upstream, str(cut_s)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(_READY), f"the proxy did not start: {line!r}"
        yield line[len(_READY) :].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


# ---- the tests ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def twin() -> Iterator[TwinProcess]:
    with TwinProcess("healthy", load_time_s=0.2) as process:
        yield process


def _diagnose_through(twin: TwinProcess, cut_s: float, out: Path) -> Diagnosis:
    with cutting_proxy(twin.url, cut_s) as url:
        result = diagnose(
            DiagnoseSpec(
                url=url,
                metrics_url=f"{twin.url}/metrics",
                dcgm_url=f"{twin.url}/dcgm/metrics",
                server_pid=twin.pid,
                duration_s=_DURATION_S,
                workload=_WORKLOAD,
                concurrency=_CONCURRENCY,
                out=out,
            )
        )
    return result.diagnosis


def _stream_cut(diagnosis: Diagnosis) -> list[str]:
    findings = diagnosis.layer(Layer.APPLICATION).findings
    return [f.title for f in findings if f.id == "application.stream_cut"]


@pytest.mark.slow
def test_a_gateway_cutting_streams_at_2s_is_named(twin: TwinProcess, tmp_path: Path) -> None:
    diagnosis = _diagnose_through(twin, _CUT_S, tmp_path / "run")
    titles = _stream_cut(diagnosis)
    assert titles, [f.id for layer in diagnosis.layers for f in layer.findings]
    at = next(
        e.value
        for f in diagnosis.layer(Layer.APPLICATION).findings
        if f.id == "application.stream_cut"
        for e in f.evidence
        if e.signal == "client.stream_cut_at_s"
    )
    # the client's clock and the gateway's differ by its send and the proxy's connect
    assert 0.9 * _CUT_S <= at <= 1.25 * _CUT_S, titles
    assert f"at about {at:.1f} s" in titles[0]
    assert diagnosis.primary is not None and diagnosis.primary.layer is Layer.APPLICATION


@pytest.mark.slow
def test_a_proxy_passing_everything_cuts_nothing(twin: TwinProcess, tmp_path: Path) -> None:
    diagnosis = _diagnose_through(twin, 0.0, tmp_path / "run")
    assert not _stream_cut(diagnosis)
    # the streams did outlast the 2 s a cutting gateway would have allowed
    run = RunDir.open(tmp_path / "run")
    longest = max(
        r.end_ts - r.sent_ts for r in run.iter_records(run.requests, RequestRecord) if r.end_ts
    )
    assert longest > 1.5 * _CUT_S, longest
    findings = {f.id for layer in diagnosis.layers for f in layer.findings}
    assert "application.error_rate" not in findings, findings


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], float(sys.argv[2])))
