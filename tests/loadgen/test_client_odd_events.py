"""A server's output is data, never a crash: every odd answer is one failed record of its own.

Each mode of `oddserver` (wrong shapes, counts that are not counts, an echoed key as the
request id, a compressed body, an HTML page, tool calls only, no token at all, bare-CR
line ends, one huge event, a broken chunked body) through the real client, one request
at a time; then all of them in one `bench` run whose run directory is read back, once
with the asyncio client and once through Locust's workers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from pathlib import Path

import orjson
import pytest

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec, ClientSpec
from infertriage.loadgen.client import ClientConfig, Endpoint, RequestClient, make_session
from infertriage.schemas import ErrorKind, RequestRecord, RunDir

from .conftest import READERS, spec, use_reader
from .oddserver import EXPECTED_FAULT, MODES, serve_odd

KEY = "sk-odd-0123456789abcdefghij"
# Every mode once, each odd one followed by a healthy request (a closed-loop user backs
# off after a failure before any token; the healthy one resets it).
PLAN = [mode for name in MODES if name != "ok" for mode in (name, "ok")]


def _fetch(
    url: str, mode: str, endpoint: Endpoint = Endpoint.CHAT, reader: str = "h1"
) -> RequestRecord:
    cfg = ClientConfig(
        base_url=url + "/v1", model="odd-model", endpoint=endpoint, api_key=KEY,
        stall_timeout_s=20.0, timeout_s=30.0,
    )  # fmt: skip

    async def go() -> RequestRecord:
        async with make_session(cfg) as session:
            client = RequestClient(cfg, session)
            use_reader(client, reader)
            client._headers["X-Odd-Mode"] = mode
            start = time.perf_counter_ns()
            state = client.new_state(spec(), start)
            try:
                await client.fetch(state, "req-1")
            finally:
                await client.aclose()
            return state.record("req-1", start)

    return asyncio.run(go())


def _expected(record: RequestRecord, mode: str) -> tuple[str, ErrorKind]:
    fault = EXPECTED_FAULT[mode]
    if mode == "bad_chunk" and record.headers_ts is None:
        # The break came in one read with the headers: the response never parsed at all.
        return "protocol", ErrorKind.CONNECT
    return fault, ErrorKind.STREAM if fault else ErrorKind.NONE


def _check(record: RequestRecord, mode: str) -> None:
    fault, kind = _expected(record, mode)
    assert (record.fault, record.error_kind) == (fault, kind), (mode, record.error_text)
    assert KEY not in orjson.dumps(record).decode()
    if not fault:
        assert record.first_token_ts is not None and record.output_tokens
    if fault:
        assert record.error_text, mode


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_each_odd_answer_is_its_own_record(mode: str, reader: str) -> None:
    with serve_odd() as (url, _):
        record = _fetch(url, mode, reader=reader)
    _check(record, mode)


def test_the_texts_say_what_the_server_sent() -> None:
    with serve_odd() as (url, _):
        records = {m: _fetch(url, m) for m in ("html", "text_plain", "choices_null", "count_huge")}
    assert "HTML page" in records["html"].error_text
    assert "login page or proxy" in records["html"].error_text
    assert "text/plain" in records["text_plain"].error_text
    assert "`choices[0]` is null, not an object" in records["choices_null"].error_text
    assert "usage.completion_tokens" in records["count_huge"].error_text


def test_a_string_prompt_count_is_not_stored() -> None:
    with serve_odd() as (url, _):
        record = _fetch(url, "prompt_tokens_str")
    assert record.prompt_tokens == 16 and isinstance(record.prompt_tokens, int)  # the spec's


def test_an_echoed_key_as_the_request_id_is_redacted() -> None:
    with serve_odd() as (url, _):
        header, event = _fetch(url, "echo_id"), _fetch(url, "echo_event_id")
    assert header.server_request_id == "Bearer ***"
    assert event.server_request_id == "chatcmpl-Bearer ***"


def test_tool_calls_time_the_first_call_and_say_so() -> None:
    with serve_odd() as (url, _):
        tools, text = _fetch(url, "tool_calls"), _fetch(url, "ok")
    assert tools.ok and tools.ttft_s is not None and tools.output_tokens == 12
    assert tools.labels["ttft_from"] == "tool_call"
    assert "ttft_from" not in text.labels


def test_completions_read_odd_answers_too() -> None:
    with serve_odd() as (url, _):
        records = {m: _fetch(url, m, Endpoint.COMPLETIONS) for m in ("ok", "gzip", "count_str")}
    assert records["ok"].ok and records["gzip"].ok
    assert records["gzip"].output_tokens == records["ok"].output_tokens == 3
    assert records["count_str"].fault == "bad_count"


def _bench(url: str, out: Path, **fields: object) -> BenchSpec:
    return BenchSpec(
        url=url, client=ClientSpec(api_key=KEY), concurrencies=(1,), num_requests=len(PLAN),
        out=out, workload="synthetic:input=16,output=3", check_tokens=False,
        stall_timeout_s=20.0, timeout_s=30.0, **fields,
    )  # fmt: skip


def _check_run(out: Path, seen: list[str], stderr: str) -> None:
    assert "Traceback" not in stderr
    for log in out.glob("locust/*.log"):  # Locust's processes write theirs here
        assert "Traceback" not in log.read_text(), log.name
    assert KEY not in (out / "requests.jsonl").read_text()
    run = RunDir.open(out)
    records = {r.id: r for r in run.iter_records(run.requests, RequestRecord)}
    # Every request sent has its record, once; each odd one fails alone with its fault.
    assert len(records) == len(PLAN) and sorted(records) == sorted(seen)
    for record in records.values():
        _check(record, PLAN[int(record.id.rpartition("-")[2])])


def test_a_bench_run_keeps_a_record_of_every_odd_answer(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with serve_odd(dict(enumerate(PLAN))) as (url, server):
        result = run_bench(_bench(url, tmp_path / "run"))
    summary = result.levels[0].summary
    assert summary.num_ok == sum(1 for m in PLAN if not EXPECTED_FAULT[m])
    assert summary.num_failed == sum(1 for m in PLAN if EXPECTED_FAULT[m])
    _check_run(tmp_path / "run", server.seen, capfd.readouterr().err)


@pytest.mark.skipif(
    importlib.util.find_spec("locust") is None,
    reason="locust is not installed (pip install 'infertriage[distributed]')",
)
def test_locust_workers_keep_a_record_of_every_odd_answer(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with serve_odd(dict(enumerate(PLAN))) as (url, server):
        run_bench(_bench(url, tmp_path / "run", locust_workers=1))
    _check_run(tmp_path / "run", server.seen, capfd.readouterr().err)
