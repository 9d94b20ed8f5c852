"""twin, level 2: the twin's HTTP server (aiohttp), an OpenAI-compatible vLLM look-alike.

Takes a `Scenario`; serves `/v1/completions`, `/v1/chat/completions` (SSE
streaming with `stream_options.include_usage` and `continuous_usage_stats`),
`/v1/models`, `/health`, `/tokenize`, `/version`, `/metrics` (vLLM V1 names),
`/dcgm/metrics` (dcgm-exporter names) and, with a profile directory,
`/start_profile` and `/stop_profile` (a simulated Kineto trace written
there), on 127.0.0.1 by default. The front end (tokenize, detokenize,
serialize) runs on the event loop's thread and pays the scenario's CPU
costs there; each engine core runs on its own thread (`EngineDriver`): one, or
data-parallel ranks behind a balancer (`twin.ranks`), or prefill and decode
instances with a KV transfer between them (`twin.disagg`).
Errors are OpenAI-format bodies, with vLLM's messages: a prompt (plus
`max_tokens`) longer than `max_model_len`, `min_tokens` above `max_tokens`
or malformed JSON → 400, an unknown model → 404, an injected fault → 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import sys
import time
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from infertriage import __version__
from infertriage.schemas import UserError
from infertriage.twin.costmodel import gpu_activity
from infertriage.twin.dcgm import DcgmExporter, GpuIdentity
from infertriage.twin.disagg import DisaggregatedFleet
from infertriage.twin.driver import AddCommand, EngineDriver
from infertriage.twin.engine import MonotonicClock, StepResult
from infertriage.twin.eplb import eplb_metrics
from infertriage.twin.frontend import FrontEnd, apply_chat_template, split_tokens
from infertriage.twin.openai_api import (
    ApiError,
    GenerateRequest,
    error_body,
    find_stop,
    make_chunk,
    make_response,
    parse_generate,
)
from infertriage.twin.profile import MAX_PROFILED_STEPS, trace_bytes
from infertriage.twin.ranks import DataParallelFleet, Fleet
from infertriage.twin.request import FinishReason, RequestTimings, SamplingParams
from infertriage.twin.scenario_model import Scenario
from infertriage.twin.scheduler import RequestOutput
from infertriage.twin.tracing import RequestSpans

__all__ = ["TwinApp", "make_app", "serve"]

_SWITCH_INTERVAL_S = 0.0005  # let the engine thread take the GIL promptly from a busy front end
_BOARD_WATTS = {"nvlink": 700.0, "pcie": 350.0}
_MAX_REQUEST_ID = 128  # characters of a client's X-Request-Id the twin keeps


def _json(document: object, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(document), status=status, content_type="application/json")


def _error(err: ApiError) -> web.Response:
    return _json(error_body(err), err.status)


@dataclass
class _Stream:
    queue: asyncio.Queue[RequestOutput] = field(default_factory=asyncio.Queue)


class TwinApp:
    """State of one twin: its engines (`Fleet`), the front end, the metrics."""

    def __init__(
        self,
        scenario: Scenario,
        model_name: str | None = None,
        profile_dir: Path | None = None,
        otlp_endpoint: str | None = None,
    ) -> None:
        self.scenario = scenario
        # vLLM's `--otlp-traces-endpoint`: one `llm_request` span per finished request
        self.spans = RequestSpans(otlp_endpoint) if otlp_endpoint else None
        self.profile_dir = profile_dir
        self._profiled: list[StepResult] | None = None
        self.model_name = model_name or scenario.model
        self.fleet = make_fleet(scenario, self.model_name)
        self.engine = self.fleet.first
        hw = self.engine.hardware
        self.frontend = FrontEnd(scenario.frontend, self.engine.vocab_size)
        self._streams: dict[str, _Stream] = {}
        self._started = time.monotonic()
        self._created = int(time.time())
        self.metrics = self.fleet.metrics
        self.dcgm = DcgmExporter(
            GpuIdentity(
                model_name=f"NVIDIA {hw.gpu.name}",
                num_gpus=self.fleet.num_gpus,
                memory_bytes=hw.gpu.memory_bytes,
                used_bytes=min(hw.gpu.memory_bytes, hw.used_bytes_per_gpu),
                board_watts=_BOARD_WATTS.get(hw.gpu.link, 400.0),
                link=scenario.interconnect,
                # each instance (a DP rank, a P or D instance) has the same stages
                activity=gpu_activity(scenario) * len(self.fleet.instances),
            ),
            self.fleet.gpu_counters,
        )

    @property
    def driver(self) -> EngineDriver | None:
        """The first engine's driver (the only one without data parallelism or P/D)."""
        return self.fleet.instances[0].driver

    @property
    def loaded(self) -> bool:
        return time.monotonic() - self._started >= self.scenario.engine.load_time_s

    # ------------------------------------------------------------------ lifecycle
    async def on_startup(self, _app: web.Application) -> None:
        self.fleet.start(asyncio.get_running_loop(), self._deliver, self._record_step)

    def _record_step(self, result: StepResult) -> None:
        profiled = self._profiled
        if profiled is not None and len(profiled) < MAX_PROFILED_STEPS:
            profiled.append(result)

    async def start_profile(self, _request: web.Request) -> web.Response:
        if self.profile_dir is None:
            err = ApiError(404, "profiling is off: start the twin with --profile-dir.", "NotFound")
            return _error(err)
        self._profiled = []
        return web.Response(status=200)

    async def stop_profile(self, _request: web.Request) -> web.Response:
        steps, self._profiled = self._profiled, None
        if self.profile_dir is None or steps is None:
            return _error(ApiError(400, "no profile is running.", "BadRequestError"))
        data = await asyncio.to_thread(trace_bytes, steps, self.scenario)
        name = f"twin.{int(time.time() * 1000)}.pt.trace.json.gz"
        await asyncio.to_thread((self.profile_dir / name).write_bytes, data)
        return web.Response(status=200)

    async def on_cleanup(self, _app: web.Application) -> None:
        self.fleet.stop()
        if self.spans is not None:
            await asyncio.to_thread(self.spans.shutdown)

    def _deliver(self, outputs: Sequence[RequestOutput]) -> None:
        for output in outputs:
            stream = self._streams.get(output.request_id)
            if stream is not None:
                stream.queue.put_nowait(output)

    # ------------------------------------------------------------------ small endpoints
    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200 if self.loaded else 503)

    async def version(self, _request: web.Request) -> web.Response:
        return _json({"version": f"0.11.0+infertriage.twin.{__version__}"})

    async def models(self, _request: web.Request) -> web.Response:
        card = {
            "id": self.model_name,
            "object": "model",
            "created": self._created,
            "owned_by": "infertriage-twin",
            "root": self.model_name,
            "parent": None,
            "max_model_len": self.scenario.engine.max_model_len,
        }
        return _json({"object": "list", "data": [card]})

    async def prometheus(self, _request: web.Request) -> web.Response:
        await self.fleet.settled()  # the steps whose chunks went out are counted
        body = self.metrics.render() + eplb_metrics(self.scenario, self.model_name).encode()
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def dcgm_metrics(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.dcgm.render(), content_type="text/plain", charset="utf-8")

    async def tokenize(self, request: web.Request) -> web.Response:
        try:
            body = await self._body(request)
            started_ns = time.perf_counter_ns()
            tokens = self._prompt_tokens(body)
        except ApiError as err:
            return _error(err)
        ids = self.frontend.tokenize(tokens, started_ns)
        return _json(
            {"count": len(ids), "max_model_len": self.scenario.engine.max_model_len, "tokens": ids}
        )

    # ------------------------------------------------------------------ generation
    async def _body(self, request: web.Request) -> Any:
        try:
            return orjson.loads(await request.read())
        except orjson.JSONDecodeError as err:
            raise ApiError(400, f"the request body is not valid JSON: {err.msg}.") from err

    def _prompt_tokens(self, body: Any) -> list[str]:
        chat = isinstance(body, dict) and "messages" in body
        return _tokens_of(parse_generate(body, chat=chat))

    def _check_model(self, spec: GenerateRequest) -> None:
        if spec.model is not None and spec.model != self.model_name:
            raise ApiError(404, f"The model `{spec.model}` does not exist.", "NotFoundError")

    def _sampling(self, spec: GenerateRequest, num_prompt: int) -> SamplingParams:
        limit = self.scenario.engine.max_model_len
        if num_prompt >= limit:
            raise ApiError(
                400,
                f"This model's maximum context length is {limit} tokens. However, your request "
                f"has {num_prompt} input tokens. Please reduce the length of the input messages.",
            )
        max_tokens = spec.max_tokens if spec.max_tokens is not None else limit - num_prompt
        if num_prompt + max_tokens > limit:
            raise ApiError(
                400,
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{num_prompt + max_tokens} tokens ({num_prompt} in the messages, {max_tokens} in "
                "the completion). Please reduce the length of the messages or completion.",
            )
        if spec.min_tokens > max_tokens:
            raise ApiError(
                400,
                f"min_tokens must be less than or equal to max_tokens={max_tokens}, "
                f"got {spec.min_tokens}.",
            )
        return SamplingParams(
            max_tokens=max_tokens,
            min_tokens=spec.min_tokens,
            ignore_eos=spec.ignore_eos,
            stop_token_ids=spec.stop_token_ids,
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        if not self.loaded:
            return _error(ApiError(503, "the model is still loading.", "ServiceUnavailableError"))
        try:
            spec = parse_generate(await self._body(request), chat)
            self._check_model(spec)
            started_ns = time.perf_counter_ns()
            ids = self.frontend.tokenize(_tokens_of(spec), started_ns)
            params = self._sampling(spec, len(ids))
        except ApiError as err:
            return _error(err)
        request_id = self._request_id(request, chat)
        stream = _Stream()
        self._streams[request_id] = stream
        # Output is seeded by the prompt, as greedy decoding is: the same prompt, the same text.
        seed = zlib.crc32(b"".join(i.to_bytes(4, "little") for i in ids))
        self.fleet.submit(AddCommand(request_id, tuple(ids), params, self.fleet.now(), seed))
        generation = _Generation(self, spec, request_id, len(ids))
        try:
            if spec.stream:
                return await generation.stream(request, stream.queue)
            return await generation.whole(stream.queue)
        finally:
            self._streams.pop(request_id, None)
            self.fleet.finish(request_id, abort=not generation.engine_finished)
            if self.spans is not None and generation.timings is not None:
                self.spans.emit(
                    generation.timings,
                    request.headers,
                    request_id=request_id,
                    engine_now_s=self.fleet.now(),
                    max_tokens=spec.max_tokens,
                )

    def _request_id(self, request: web.Request, chat: bool) -> str:
        """As vLLM names a request: its prefix and the client's `X-Request-Id`, else a uuid
        (one already in flight is not reused: a duplicate would mix two streams)."""
        given = request.headers.get("X-Request-Id", "")[:_MAX_REQUEST_ID]
        request_id = f"{'chatcmpl' if chat else 'cmpl'}-{given or uuid.uuid4().hex}"
        if request_id in self._streams:
            request_id = f"{request_id}-{uuid.uuid4().hex[:8]}"
        return request_id


def make_fleet(scenario: Scenario, model_name: str) -> Fleet:
    """The engines of a scenario: P/D instances, or data-parallel ranks (one by default)."""
    clock = MonotonicClock()
    if scenario.disaggregation is not None:
        return DisaggregatedFleet(scenario, model_name, clock)
    return DataParallelFleet(scenario, model_name, clock)


def _tokens_of(spec: GenerateRequest) -> list[str]:
    """The prompt as tokens: the chat template for messages, the rule for a plain prompt."""
    return apply_chat_template(spec.messages) if spec.chat else split_tokens(spec.prompt or "")


class _Generation:
    """One request's output as it is detokenized, stop-checked and written."""

    def __init__(self, app: TwinApp, spec: GenerateRequest, request_id: str, num_prompt: int):
        self.app = app
        self.spec = spec
        self.request_id = request_id
        self.num_prompt = num_prompt
        self.num_output = 0
        self.text = ""
        self.finished = False  # the client's response is complete
        self.engine_finished = False  # the engine is done with the request
        self.finish_reason = "length"
        self.timings: RequestTimings | None = None  # the engine's, once it finished the request

    def _take(self, output: RequestOutput) -> str:
        """The new text of one output; applies stop strings (finishing the request early)."""
        new = self.app.frontend.detokenize(output.new_token_ids)
        self.num_output += len(output.new_token_ids)
        if output.finish_reason is not None:
            self.finished = self.engine_finished = True
            self.timings = output.timings
            self.finish_reason = "stop" if output.finish_reason is FinishReason.STOP else "length"
        if self.spec.stop:
            cut = find_stop(self.text + new, self.spec.stop)
            if cut is not None:
                new = (self.text + new)[:cut][len(self.text) :]
                self.finish_reason = "stop"
                self.finished = True
        self.text += new
        return new

    async def _next(self, queue: asyncio.Queue[RequestOutput]) -> RequestOutput:
        output = await queue.get()
        if output.finish_reason is FinishReason.ERROR:
            self.finished = self.engine_finished = True
            raise ApiError(
                500, "the engine failed this request (injected fault).", "InternalServerError"
            )
        return output

    async def whole(self, queue: asyncio.Queue[RequestOutput]) -> web.Response:
        try:
            while not self.finished:
                self._take(await self._next(queue))
        except ApiError as err:
            return _error(err)
        document = make_response(
            self.request_id,
            self.app.model_name,
            self.spec.chat,
            text=self.text,
            finish_reason=self.finish_reason,
            usage_counts=(self.num_prompt, self.num_output),
        )
        started_ns = time.perf_counter_ns()
        body = orjson.dumps(document)
        self.app.frontend.serialize_cost(started_ns)
        return web.Response(body=body, content_type="application/json")

    async def stream(
        self, request: web.Request, queue: asyncio.Queue[RequestOutput]
    ) -> web.StreamResponse:
        try:
            first = await self._next(queue)
        except ApiError as err:
            return _error(err)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        model, chat = self.app.model_name, self.spec.chat
        if chat:
            await self._send(
                response, make_chunk(self.request_id, model, chat, text="", role="assistant")
            )
        output: RequestOutput | None = first
        while output is not None:
            text = self._take(output)
            counts = (
                (self.num_prompt, self.num_output) if self.spec.continuous_usage_stats else None
            )
            reason = self.finish_reason if self.finished else None
            chunk = make_chunk(
                self.request_id, model, chat, text=text, finish_reason=reason, usage_counts=counts
            )
            await self._send(response, chunk)
            output = None if self.finished else await self._next_or_none(queue, response)
        if self.spec.include_usage:
            usage_chunk = make_chunk(
                self.request_id,
                model,
                chat,
                text=None,
                usage_counts=(self.num_prompt, self.num_output),
                choices=False,
            )
            await self._send(response, usage_chunk)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _next_or_none(
        self, queue: asyncio.Queue[RequestOutput], response: web.StreamResponse
    ) -> RequestOutput | None:
        try:
            return await self._next(queue)
        except ApiError as err:
            await response.write(b"data: " + orjson.dumps(error_body(err)) + b"\n\n")
            return None

    async def _send(self, response: web.StreamResponse, chunk: dict[str, Any]) -> None:
        started_ns = time.perf_counter_ns()
        data = b"data: " + orjson.dumps(chunk) + b"\n\n"
        self.app.frontend.serialize_cost(started_ns)
        await response.write(data)


def make_app(
    scenario: Scenario,
    model_name: str | None = None,
    profile_dir: Path | None = None,
    otlp_endpoint: str | None = None,
) -> web.Application:
    twin = TwinApp(scenario, model_name, profile_dir, otlp_endpoint)
    app = web.Application(client_max_size=64 * 1024**2)
    app["twin"] = twin
    app.on_startup.append(twin.on_startup)
    app.on_cleanup.append(twin.on_cleanup)
    app.router.add_get("/health", twin.health)
    app.router.add_get("/version", twin.version)
    app.router.add_get("/v1/models", twin.models)
    app.router.add_get("/metrics", twin.prometheus)
    app.router.add_get("/dcgm/metrics", twin.dcgm_metrics)
    app.router.add_post("/tokenize", twin.tokenize)
    app.router.add_post("/start_profile", twin.start_profile)
    app.router.add_post("/stop_profile", twin.stop_profile)
    app.router.add_post("/v1/completions", twin.completions)
    app.router.add_post("/v1/chat/completions", twin.chat_completions)
    return app


async def _serve(app: web.Application, host: str, port: int, ready_line: bool) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except (OSError, OverflowError) as err:
        await runner.cleanup()
        problem = _bind_problem(err, host, port)
        raise UserError(f"cannot listen on {host}:{port}: {problem}.") from err
    # aiohttp exposes the bound port (port 0 asks the OS for one) only on the site's server
    server: Any = site._server
    bound = server.sockets[0].getsockname()[1] if server is not None else port
    if ready_line:
        print(f"infertriage twin listening on http://{host}:{bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def _bind_problem(err: OSError | OverflowError, host: str, port: int) -> str:
    code = getattr(err, "errno", None)
    if isinstance(err, OverflowError):
        return "a port is a number from 0 to 65535"
    if isinstance(err, socket.gaierror):
        return f"{host!r} is not a host name or address this machine can resolve"
    if code == errno.EADDRINUSE:
        return f"port {port} is in use (pick another --port, or 0 for a free one)"
    if code == errno.EADDRNOTAVAIL:
        return f"{host} is not an address of this machine (127.0.0.1 or 0.0.0.0 are)"
    if code == errno.EACCES:
        return f"binding port {port} needs privileges (use a port above 1023)"
    return os.strerror(code) if code else str(err)


def serve(
    scenario: Scenario,
    host: str = "127.0.0.1",
    port: int = 8000,
    profile_dir: Path | None = None,
    otlp_endpoint: str | None = None,
) -> None:
    """Serve the twin until interrupted; prints one line with the bound URL (port 0 picks one).
    `otlp_endpoint`: export vLLM's request spans there (OTLP/HTTP)."""
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    app = make_app(scenario, profile_dir=profile_dir, otlp_endpoint=otlp_endpoint)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(app, host, port, ready_line=True))
