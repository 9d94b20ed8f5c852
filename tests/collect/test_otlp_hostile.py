"""`diagnose --otlp-listen` and `--spans` against hostile input: a gzip bomb, NaN and
negative latencies, a port written in other digits, a file cut short mid-line, JSON
lines that are not OTLP documents. Each is answered with a clear refusal, or its
complete parts kept; none brings the receiver down or writes a wrong figure."""

from __future__ import annotations

import gzip
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest

from infertriage.analyze.signals.spans import join_spans
from infertriage.collect import otlp
from infertriage.collect.otlp import read_span_file, spans_of
from infertriage.collect.otlp_receiver import TRACES_PATH, OtlpReceiver
from infertriage.engines.vllm_spans import VllmSpan
from infertriage.schemas import RequestRecord, UserError

SRC = Path(__file__).parents[2] / "src"
TRACE = "ab" * 16
JSON = "application/json"


def _document(*attributes: tuple[str, object]) -> dict[str, object]:
    attrs = [{"key": key, "value": {"doubleValue": value}} for key, value in attributes]
    span = {
        "traceId": TRACE,
        "spanId": "cd" * 8,
        "name": "llm_request",
        "startTimeUnixNano": "1000",
        "endTimeUnixNano": "2000",
        "attributes": attrs,
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def _gzip_of_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"0" * 1024**2
    return b"".join(packer.compress(chunk) for _ in range(size // len(chunk))) + packer.flush()


def test_a_gzip_bomb_is_refused_before_it_fills_the_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp, "MAX_INFLATED", 1024**2)  # the cap, made small for the test
    bomb = _gzip_of_zeros(8 * 1024**2)
    assert len(bomb) < 64 * 1024
    with OtlpReceiver("127.0.0.1", 0, tmp_path / "spans.jsonl") as receiver:
        connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=30)
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        connection.request("POST", TRACES_PATH, body=bomb, headers=headers)
        answer = connection.getresponse()
        assert answer.status == 413
        assert b"inflates past" in answer.read()
        # a good export after it is still taken
        good = json.dumps(_document((VllmSpan.TIME_IN_QUEUE, 0.5))).encode()
        connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=30)
        connection.request(
            "POST", TRACES_PATH, body=good, headers={"Content-Type": "application/json"}
        )
        assert connection.getresponse().status == 200
        assert [s.trace_id for s in receiver.spans()] == [TRACE]
    assert len(receiver.errors) == 1


def test_a_gzip_body_cut_short_is_a_400(tmp_path: Path) -> None:
    cut = _gzip_of_zeros(1024**2)[:-12]
    with pytest.raises(otlp.OtlpError) as caught:
        otlp.decode_export(cut, "application/json", "gzip")
    assert caught.value.status == 400


def test_nan_infinite_and_negative_latencies_are_no_figures() -> None:
    document = _document(
        (VllmSpan.TIME_IN_QUEUE, "NaN"),
        (VllmSpan.TIME_IN_MODEL_PREFILL, "Infinity"),
        (VllmSpan.TIME_IN_MODEL_DECODE, -5.0),
        (VllmSpan.TIME_TO_FIRST_TOKEN, 0.25),
    )
    (span,) = spans_of(document)
    assert VllmSpan.TIME_IN_QUEUE not in span.attributes
    assert VllmSpan.TIME_IN_MODEL_PREFILL not in span.attributes
    record = RequestRecord(
        id="r1", scheduled_ts=0.0, sent_ts=0.0, first_token_ts=0.5, trace_id=TRACE
    )
    (joined,) = join_spans([record], [span]).joined
    assert joined.queue_s is None and joined.prefill_s is None
    assert joined.decode_s is None  # -5 s of decode is a broken exporter, not a measure
    assert joined.server_ttft_s == 0.25


def test_a_span_file_cut_short_mid_line_keeps_its_complete_lines(tmp_path: Path) -> None:
    line = json.dumps(_document((VllmSpan.TIME_IN_QUEUE, 0.5)))
    other = json.dumps(_document()).replace(TRACE, "ef" * 16)
    path = tmp_path / "collector.jsonl"
    path.write_text(f"{line}\n{other}\n{line[: len(line) // 2]}", encoding="utf-8")
    assert {s.trace_id for s in read_span_file(path)} == {TRACE, "ef" * 16}
    # a broken line before the end is no cut: the file is refused
    path.write_text(f"{line[: len(line) // 2]}\n{line}\n", encoding="utf-8")
    with pytest.raises(UserError, match="is not OTLP JSON"):
        read_span_file(path)


def test_json_lines_that_are_not_documents_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text('[1, 2]\n"x"\n', encoding="utf-8")
    with pytest.raises(UserError, match="is not OTLP JSON"):
        read_span_file(path)
    path.write_text("", encoding="utf-8")  # an empty export: no span, no error
    assert read_span_file(path) == []


def test_a_port_in_other_digits_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-m", "infertriage", "diagnose", "--otlp-listen", "127.0.0.1:²",
         "--duration", "1", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--otlp-listen takes HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _twin(endpoint: str, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [sys.executable, "-m", "infertriage", "twin", "--port", "0",
         "--otlp-traces-endpoint", endpoint],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("endpoint", ["not a url", "ftp://h/v1/traces", "http://", "http://[h"])
def test_the_twin_refuses_an_endpoint_that_is_not_a_url_before_serving(endpoint: str) -> None:
    done = _twin(endpoint, str(SRC))  # before: it served, and each batch failed on stderr
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--otlp-traces-endpoint takes an OTLP/HTTP URL" in done.stderr
    assert "listening" not in done.stdout and len(done.stderr.strip().splitlines()) == 1


def test_the_twin_without_the_sdk_says_what_to_install(tmp_path: Path) -> None:
    hidden = tmp_path / "hide" / "opentelemetry"  # a package that shadows the SDK's
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("not installed")\n', encoding="utf-8")
    done = _twin("http://127.0.0.1:4318/v1/traces", f"{hidden.parent}{os.pathsep}{SRC}")
    assert done.returncode == 2, done.stderr
    assert "pip install 'infertriage[otel]'" in done.stderr and "Traceback" not in done.stderr


def test_an_export_that_cannot_be_kept_is_a_note_not_a_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    sink = tmp_path / "gone" / "spans.jsonl"  # the run's folder removed under the receiver
    body = json.dumps(_document((VllmSpan.TIME_IN_QUEUE, 0.5))).encode()
    with OtlpReceiver("127.0.0.1", 0, sink) as receiver:
        connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=30)
        connection.request("POST", TRACES_PATH, body=body, headers={"Content-Type": JSON})
        answer = connection.getresponse()
        assert answer.status == 503  # the exporter keeps the batch and sends it again
        assert b"could not be kept" in answer.read()
        assert receiver.num_exports == 0 and not receiver.spans()
    assert receiver.errors == ["an export could not be kept: No such file or directory"]
    assert "Traceback" not in capfd.readouterr().err


def test_spans_from_a_pipe_are_read_once_and_kept(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "runs" / "diagnose", run)
    pipe = tmp_path / "spans.fifo"  # what `--spans <(zcat spans.json.gz)` gives
    os.mkfifo(pipe)
    line = json.dumps(_document((VllmSpan.TIME_IN_QUEUE, 0.5))) + "\n"

    def feed() -> None:
        with pipe.open("w", encoding="utf-8") as out:
            out.write(line)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-m", "infertriage", "diagnose", "--from-run", str(run),
         "--spans", str(pipe)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    writer.join(timeout=10)
    assert done.returncode == 0, done.stderr  # before: a SpecialFileError traceback, exit 1
    kept = run / "raw" / "otlp-spans-file.jsonl"
    assert kept.read_text(encoding="utf-8") == line


def test_integers_past_int64_and_times_past_fixed64_are_left_out() -> None:
    document = _document()
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]  # type: ignore[index]
    span["attributes"] = [
        {"key": VllmSpan.TIME_IN_QUEUE, "value": {"intValue": "9" * 400}},
        {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "512"}},
    ]
    (kept,) = spans_of(document)
    assert kept.number(VllmSpan.TIME_IN_QUEUE) is None  # before: OverflowError in the join
    assert kept.number("gen_ai.usage.prompt_tokens") == 512.0
    for start in ("-1", str(2**64), "9" * 30):
        span["startTimeUnixNano"] = start
        assert spans_of(document) == []  # a span without a time is no span


@pytest.mark.parametrize("value", ["in-use", "nope", "127.0.0.1:99999", "127.0.0.1:-1", ""])
def test_an_address_it_cannot_listen_on_is_one_sentence(tmp_path: Path, value: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if value == "in-use":
            value = f"127.0.0.1:{taken.getsockname()[1]}"
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        done = subprocess.run(
            [sys.executable, "-m", "infertriage", "diagnose", "--otlp-listen", value,
             "--duration", "1", "--out", str(tmp_path / "run")],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("infertriage: error: --otlp-listen")
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_span_file_that_never_ends_is_refused_at_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp, "MAX_INFLATED", 1024**2)  # the cap, made small for the test
    zero = tmp_path / "spans.json"
    zero.symlink_to("/dev/zero")  # before: read until the memory ran out (a pipe is read too)
    with pytest.raises(UserError, match="larger than 1 MiB"):
        read_span_file(zero)


def test_a_fifo_nothing_writes_to_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "spans.fifo"
    os.mkfifo(fifo)  # before: open() waited for a writer forever
    with pytest.raises(UserError, match="gave no bytes: nothing had written to it"):
        read_span_file(fifo)


def test_a_gzip_span_file_that_inflates_past_the_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(otlp, "MAX_INFLATED", 1024**2)  # the cap, made small for the test
    bomb = tmp_path / "spans.json.gz"
    bomb.write_bytes(_gzip_of_zeros(8 * 1024**2))  # before: inflated whole, whatever its size
    with pytest.raises(UserError, match="inflates past 1 MiB"):
        read_span_file(bomb)
    two = tmp_path / "two.json.gz"  # two gzip members, as `cat a.gz b.gz` makes: both read
    line = json.dumps(_document((VllmSpan.TIME_IN_QUEUE, 0.5))) + "\n"
    other = line.replace(TRACE, "ef" * 16)
    two.write_bytes(gzip.compress(line.encode()) + gzip.compress(other.encode()))
    assert {s.trace_id for s in read_span_file(two)} == {TRACE, "ef" * 16}


def test_a_runs_own_span_file_is_read_past_the_bound_a_given_one_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver's file grows with the run (~1 KB a span): a run with more spans than a
    user's `--spans` may hold is read whole, not refused after its load (review)."""
    monkeypatch.setattr(otlp, "MAX_INFLATED", 1024)  # the cap, made small for the test
    path = tmp_path / "otlp-spans.jsonl"
    path.write_bytes(b'{"resourceSpans": []}\n' * 200)  # 4.4 KB
    with pytest.raises(UserError, match="larger than"):
        otlp.read_span_file(path)
    assert otlp.read_span_file(path, bounded=False) == []
