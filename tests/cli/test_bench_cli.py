"""`infertriage bench` from the command line: errors, --json, the key, Ctrl-C, a kill."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.schemas import ErrorKind, RequestRecord, RunDir
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

FAST = Behavior(ttft_s=0.005, itl_s=0.002)
SMALL = ["--workload", "synthetic:input=8,output=5"]


@pytest.fixture
def url() -> Iterator[str]:
    with serve_in_thread(ServerConfig(behavior=FAST)) as (base, _):
        yield base


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "infertriage", "bench", *args]
    return subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=60,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_a_wrong_url_fails_fast_in_one_sentence() -> None:
    started = time.monotonic()
    result = _cli("--url", f"http://127.0.0.1:{_free_port()}", "--num-requests", "3")
    assert result.returncode == 2
    assert time.monotonic() - started < 10
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("infertriage: error: cannot connect to")
    assert "Traceback" not in result.stderr and result.stdout == ""


@contextlib.contextmanager
def _raw_service(answer: bytes | None, hold_s: float = 0.0) -> Iterator[int]:
    """A TCP service on 127.0.0.1 that writes `answer` to each connection and reads what
    comes, or (None) reads the request and closes without a word (after `hold_s`)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2.0)
                with contextlib.suppress(OSError):
                    if answer is not None:
                        conn.sendall(answer)
                    conn.recv(65536)
                    stop.wait(hold_s)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        server.close()


@pytest.mark.parametrize(
    ("answer", "sentence"),
    [
        # a mail server on the port: what it said is in the sentence
        # (aiohttp's own words differ by release: "Bad status line: …" or "Expected HTTP/ …")
        (b"220 mail.example ESMTP ready\r\n", "did not answer in HTTP: "),
        (None, "closed the connection without answering."),
    ],
    ids=["not-http", "closes"],
)
def test_a_service_that_does_not_answer_in_http_is_named_in_one_sentence(
    answer: bytes | None, sentence: str
) -> None:
    with _raw_service(answer) as port:
        result = _cli("--url", f"http://127.0.0.1:{port}", "--num-requests", "2")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and sentence in lines[0], lines
    if answer is not None:
        assert "220 mail.example ESMTP ready" in lines[0] and "^" not in lines[0]
    assert "Traceback" not in result.stderr


def test_a_server_that_stalls_is_given_up_after_the_runs_own_timeout() -> None:
    """`--timeout 1s`: a /v1/models that does not answer fails the run after 1 s, in one
    sentence, not after the pre-flight's own 5 s."""
    with _raw_service(None, hold_s=4.0) as port:
        result = _cli("--url", f"http://127.0.0.1:{port}", "--num-requests", "2", "--timeout", "1s")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("did not answer within 1 s."), lines


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--url", "localhost:8000"], "not an http:// or https:// URL"),
        (["--rate", "fast"], "is not a number"),
        (["--rate", "-1"], "must be positive"),
        (["--rate", "2", "--concurrency", "4"], "not both"),
        (["--sweep", "--rate", "2"], "chooses its own rates"),
        (["--workload", "chat-mixx"], "unknown workload"),
        (["--header", "NoColon"], "is not NAME:VALUE"),
        (["--endpoint", "embeddings"], "--endpoint must be chat or completions"),
        (["--workers", "0"], "--workers"),
        (["--arrival", "weibull", "--rate", "2"], "unknown arrival"),
        (["--duration", "ten"], "is not a duration"),
        (["--slo", "ttft=1"], "unknown SLO"),
        (["--goodput", "speed=1"], "not METRIC=TIME"),
        (["--model", "other-model"], "is not served by"),
    ],
)
def test_bad_input_is_exit_2(
    url: str, args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if args[:2] != ["--url", "localhost:8000"]:
        args = ["--url", url, *args]
    assert main(["bench", *args, "--num-requests", "2"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_json_is_one_document_and_the_run_directory_is_complete(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["bench", "--url", url + "/v1/", "--concurrency", "2", "--num-requests", "6"]
    assert main([*args, *SMALL, "--out", str(out), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "infertriage.bench/v1" and document["model"] == "test-model"
    level = document["levels"][0]
    assert level["completed"] == 6 and level["mean_ttft_s"] > 0 and "p99_itl_s" in level
    assert isinstance(level["client"]["client_bound"], bool)
    for name in ("run.json", "requests.jsonl", "signals.jsonl", "requests.csv", "summary.csv"):
        assert (out / name).is_file(), name
    info = RunDir.open(out).read_info()
    assert info.command == "bench" and info.summary.status == "complete"
    assert (out / "requests.csv").read_text().count("\n") == 7


def test_the_summary_on_screen(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "--url", url, "--rate", "50", "--num-requests", "8", *SMALL]
    assert main([*args, "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    for needle in ("rate=50", "TTFT p50", "TPOT p50", "goodput", "Run directory"):
        assert needle in out


def test_the_api_key_is_sent_but_never_written(tmp_path: Path) -> None:
    secret = "sk-test-0123456789-SECRET"
    config = ServerConfig(behavior=FAST, api_key=secret)
    with serve_in_thread(config) as (base, srv):
        out = tmp_path / "run"
        by_flag = _cli("--url", base, "--api-key", secret, "--num-requests", "4", "--header",
                       f"X-Extra:{secret}-header", *SMALL, "--out", str(out))  # fmt: skip
        out_env = tmp_path / "run-env"
        by_env = _cli("--url", base, "--num-requests", "3", *SMALL, "--out", str(out_env),
                      "--json", env={"OPENAI_API_KEY": secret})  # fmt: skip
        assert srv.seen_keys == {secret}
    assert by_flag.returncode == 0 and by_env.returncode == 0, by_flag.stderr + by_env.stderr
    texts = [by_flag.stdout, by_flag.stderr, by_env.stdout, by_env.stderr]
    files = [p for root in (out, out_env) for p in root.rglob("*") if p.is_file()]
    assert len(files) >= 10
    texts += [p.read_text(encoding="utf-8", errors="replace") for p in files]
    assert not [t for t in texts if secret in t]
    assert '"header_names":["X-Extra"]' in (out / "run.json").read_text()


CTRL_C_RUN = """
import sys
from infertriage.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _wait_for_lines(path: Path, count: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {count} records")


def _start(url: str, out: Path, *extra: str) -> subprocess.Popen[str]:
    args = ["bench", "--url", url, "--concurrency", "4", "--duration", "30s", *SMALL[:1],
            "synthetic:input=8,output=400", "--out", str(out), *extra]  # fmt: skip
    return subprocess.Popen([sys.executable, "-c", CTRL_C_RUN, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_keeps_every_record_and_writes_a_partial_summary(
    tmp_path: Path, workers: str
) -> None:
    slow = Behavior(ttft_s=0.01, itl_s=0.002)  # 400 tokens: about 0.8 s per request
    with serve_in_thread(ServerConfig(behavior=slow)) as (base, srv):
        out = tmp_path / "run"
        proc = _start(base, out, "--workers", workers)
        _wait_for_lines(out / "requests.jsonl", 4)
        time.sleep(0.3)  # the next wave is mid-stream: its partial data must survive
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
        sent = srv.num_requests
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    run = RunDir.open(out)
    records = list(run.iter_records(run.requests, RequestRecord))
    assert len(records) == sent  # every request sent has its record
    cancelled = [r for r in records if r.fault == "cancelled"]
    assert cancelled and all(r.error_kind is ErrorKind.CLIENT for r in cancelled)
    assert any(len(r.chunks) > 0 for r in cancelled)  # what they measured is kept
    info = run.read_info()
    assert info.summary.status == "interrupted" and info.summary.interrupted is True
    assert "Interrupted" in stdout


def test_a_killed_run_keeps_its_finished_records(tmp_path: Path) -> None:
    with serve_in_thread(ServerConfig(behavior=Behavior(ttft_s=0.01, itl_s=0.002))) as (base, _):
        out = tmp_path / "run"
        proc = _start(base, out)
        _wait_for_lines(out / "requests.jsonl", 3)
        proc.kill()
        proc.communicate(timeout=30)
    run = RunDir.open(out)
    records = list(run.iter_records(run.requests, RequestRecord))
    assert len(records) >= 3 and all(r.ok for r in records)
    assert run.read_info().summary.status == "running"
