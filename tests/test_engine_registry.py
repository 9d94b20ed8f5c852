"""An engine is one adapter and one line in `engines.ENGINES`: a fake one, added the way a
contributor adds one, is seen by every reader — metrics detection, monitor-config's choices
and rules, logs' engine list and reader, the flags advice, the `/tokenize` forms (their
counts and the context length one tells) and the settings its `/metrics` carry."""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from infertriage import engines
from infertriage.api.logs import log_engines, triage_logs
from infertriage.api.monitor import monitor_config
from infertriage.api.specs import LogsSpec, MonitorConfigSpec
from infertriage.collect import adapt_scrape, config_from_metrics, detect, parse_metrics_text
from infertriage.engines import (
    ENGINE_DOMAIN,
    EngineAdapter,
    Knob,
    LogFormat,
    MetricLookup,
    MetricTable,
    SaidLimit,
    StatsLine,
    TokenizeForm,
    metric,
)
from infertriage.loadgen.context import find_context_limit
from infertriage.loadgen.tokencheck import ServerTokenizer
from infertriage.schemas import UserError

# "2026-12-05 10:00:00 fakeserve running=3 waiting=1 kv=0.5"
_STATS = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) fakeserve running=(\d+) waiting=(\d+) kv=([\d.]+)"
)


def _read_stats(line: str) -> StatsLine | None:
    found = _STATS.match(line)
    if found is None:
        return None
    return StatsLine("fakeserve", float(found[4]), float(found[2]), float(found[3]))


def _read_stamp(line: str, year: int) -> str | None:
    del year
    found = _STATS.match(line)
    return found[1] if found else None


def _tokenize_body(model: str, fields: Mapping[str, object]) -> dict[str, object] | None:
    prompt = fields.get("prompt")
    return {"model": model, "text": prompt} if isinstance(prompt, str) else None


def _token_count(document: Any) -> int | None:
    n = document.get("n") if isinstance(document, dict) else None
    return n if isinstance(n, int) else None


def _said_limit(document: Any) -> SaidLimit | None:
    length = document.get("max_len") if isinstance(document, dict) else None
    return SaidLimit(length, "fakeserve /tokenize") if isinstance(length, int) else None


def _config_in_metrics(scrape: MetricLookup) -> dict[str, object]:
    seats = scrape.get("fakeserve_max_seats")
    return {"max_num_seqs": int(seats[0].value)} if seats else {}


FAKE_METRICS = MetricTable(
    engine="fakeserve",
    title="FakeServe",
    prefixes=("fakeserve_",),
    domain=ENGINE_DOMAIN,
    mappings=(
        metric("queue.waiting", "fakeserve_waiting"),
        metric("queue.running", "fakeserve_running"),
        metric("kv.usage", "fakeserve_kv_usage"),
        metric("server.ttft", "fakeserve_ttft_seconds"),
        metric("tokens.generation", "fakeserve_generated_tokens_total"),
    ),
)

FAKE = EngineAdapter(
    name="fakeserve",
    title="FakeServe",
    metrics=(FAKE_METRICS,),
    log=LogFormat(
        read_stats=_read_stats,
        read_stamp=_read_stamp,
        interval_s=10.0,
        expected="FakeServe stats lines",
    ),
    knobs={Knob.MAX_SEATS: "--fake-seats"},
    tokenize=TokenizeForm(
        "fakeserve", "/fake/tokenize", _tokenize_body, _token_count, read_limit=_said_limit
    ),
    config_in_metrics=_config_in_metrics,
    option="fake",
)


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[EngineAdapter]:
    """FakeServe in the registry for the test: its module (above) and one entry."""
    monkeypatch.setattr(engines, "ENGINES", (*engines.ENGINES, FAKE))
    yield FAKE


_SCRAPE = """\
# TYPE fakeserve_waiting gauge
fakeserve_waiting 4
# TYPE fakeserve_running gauge
fakeserve_running 7
# TYPE fakeserve_kv_usage gauge
fakeserve_kv_usage 0.25
# TYPE fakeserve_generated_tokens_total counter
fakeserve_generated_tokens_total 1234
"""


def test_its_metrics_are_detected_and_adapted(fake_engine: EngineAdapter) -> None:
    exposition = parse_metrics_text(_SCRAPE, "fake.txt")
    detection = detect(exposition)
    assert detection.engine is FAKE_METRICS
    adapted = {a.engine: a for a in adapt_scrape(exposition, detection)}["fakeserve"]
    values = {s.name: s.value for s in adapted.scalars}
    assert values["queue.waiting"] == 4 and values["queue.running"] == 7
    assert values["kv.usage"] == 0.25


def test_without_it_the_scrape_is_no_engines(tmp_path: Path) -> None:
    assert detect(parse_metrics_text(_SCRAPE, "fake.txt")).engine is None
    with pytest.raises(UserError, match="--engine must be one of"):
        MonitorConfigSpec(engine="fake", out=tmp_path)


def test_monitor_config_offers_it_and_writes_its_names(
    fake_engine: EngineAdapter, tmp_path: Path
) -> None:
    assert engines.engine_choices()["fake"] is FAKE
    result = monitor_config(MonitorConfigSpec(engine="fake", out=tmp_path / "mon"))
    rules = "".join(text for name, text in result.config.files.items() if name.endswith(".yml"))
    assert "fakeserve_waiting" in rules and "vllm:" not in rules


def test_logs_takes_it_and_reads_its_lines(fake_engine: EngineAdapter, tmp_path: Path) -> None:
    assert "fakeserve" in log_engines()
    log = tmp_path / "fake.log"
    log.write_text(
        "".join(
            f"2026-12-05 10:00:{s:02d} fakeserve running=3 waiting={s // 10} kv=0.5\n"
            for s in range(0, 60, 10)
        )
    )
    triage = triage_logs(LogsSpec(files=(log,), engine="fakeserve"))
    assert triage.engine == "fakeserve"
    assert engines.log_title("fakeserve") == "FakeServe"
    assert engines.knob_flag("fakeserve", Knob.MAX_SEATS) == "--fake-seats"


class _Answer:
    def __init__(self, document: object) -> None:
        self.status = 200 if document is not None else 404
        self._body = orjson.dumps(document)

    async def read(self) -> bytes:
        return self._body

    async def __aenter__(self) -> _Answer:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class _FakeServeSession:
    """Answers FakeServe's `/tokenize` only: every other engine's form gets a 404."""

    timeout = None

    def __init__(self) -> None:
        self.asked: list[str] = []

    def post(self, url: str, data: bytes, timeout: object) -> _Answer:
        del timeout
        self.asked.append(url)
        body = orjson.loads(data)
        if url.endswith("/fake/tokenize"):
            return _Answer({"n": len(body["text"].split())})
        return _Answer(None)


def test_tokencheck_tries_its_form_last(fake_engine: EngineAdapter) -> None:
    assert engines.tokenize_forms()[-1] is FAKE.tokenize
    session = _FakeServeSession()
    tokenizer = ServerTokenizer(session, "http://h", "m")  # type: ignore[arg-type]
    assert asyncio.run(tokenizer.text("one two three")) == 3
    assert tokenizer.form == "fakeserve"
    assert session.asked[-1] == "http://h/fake/tokenize" and len(session.asked) == 3


def test_its_metrics_say_its_settings(fake_engine: EngineAdapter) -> None:
    scrape = parse_metrics_text(_SCRAPE + "fakeserve_max_seats 48\n", "fake.txt")
    assert config_from_metrics(scrape) == {"max_num_seqs": 48}


def test_without_it_its_settings_are_not_read() -> None:
    scrape = parse_metrics_text(_SCRAPE + "fakeserve_max_seats 48\n", "fake.txt")
    assert config_from_metrics(scrape) == {}


async def _context_limit_from_fakeserve() -> tuple[int, str] | None:
    """A loopback FakeServe whose /v1/models says no length and whose /tokenize does."""

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"n": len(body["text"].split()), "max_len": 4096})

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/fake/tokenize", tokenize)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            found = await find_context_limit(session, f"http://127.0.0.1:{port}", model="m")
    finally:
        await runner.cleanup()
    return None if found is None else (found.max_model_len, found.source)


def test_its_tokenize_tells_the_context_length(fake_engine: EngineAdapter) -> None:
    assert asyncio.run(_context_limit_from_fakeserve()) == (4096, "fakeserve /tokenize")


_ENGINE_MODULES = {
    f"infertriage.engines.{e}" for e in ("vllm", "sglang", "tgi", "trtllm", "llamacpp")
}


def _reaches_in(path: Path) -> bool:
    """The module imports one engine's module (`engines.vllm`, `from engines import vllm`)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            named = {f"{node.module}.{alias.name}" for alias in node.names}
            if node.module in _ENGINE_MODULES or named & _ENGINE_MODULES:
                return True
        if isinstance(node, ast.Import) and {a.name for a in node.names} & _ENGINE_MODULES:
            return True
    return False


def test_only_the_registry_names_an_engine() -> None:
    """Outside `engines`, code reaches an engine through the registry, not its module."""
    src = Path(engines.__file__).resolve().parents[2]
    reaching = {
        ".".join(path.relative_to(src).with_suffix("").parts)
        for path in (src / "infertriage").rglob("*.py")
        if "engines" not in path.relative_to(src).parts[1:2] and _reaches_in(path)
    }
    assert not reaching, reaching
