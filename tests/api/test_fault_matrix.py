"""The fault matrix: a server that fails in every way a real one does, and what is kept.

One loopback server (tests' `PathServer`) mixes healthy streams with resets before
and after the headers, 5xx, stalls, invalid JSON events, slow headers, a JSON body
where a stream was asked and error events; another is SIGKILLed mid-run. Every
attempted request has exactly one record with its error kind, the server saw each
request once (a resend only on a proven stale kept-alive connection, labelled and
counted), and the run re-diagnoses (`diagnose --from-run`). Ctrl-C:
tests/api/test_interrupt.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import orjson
import pytest

from infertriage.cli import main
from infertriage.schemas import RunDir
from infertriage_testing.testserver import Behavior, ServerConfig, fetch_posts, serve_in_thread

# (every n-th request, preset) → the kind:fault its record carries
FAULTS = {
    (5, "reset_before"): "connect:reset",
    (7, "reset"): "stream:reset",
    (11, "http_503"): "http:http_5xx",
    (13, "stall"): "timeout:stall",
    (17, "invalid_json"): "stream:malformed_event",
    (19, "slow_headers"): "timeout:slow_headers",
    (23, "non_stream"): "stream:not_streamed",
    (29, "error"): "stream:error_event",
}
NUM = 160
HEALTHY = Behavior(ttft_s=0.005, itl_s=0.002)


def _records(run: Path) -> list[dict[str, object]]:
    lines = (run / "requests.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _kind(record: dict[str, object]) -> str:
    kind, fault = record["error_kind"], record.get("fault") or ""
    return f"{kind}:{fault}" if fault else str(kind)


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, int]]]:
    config = ServerConfig(behavior=HEALTHY, faults=tuple(FAULTS))
    out = tmp_path_factory.mktemp("faults") / "run"
    with serve_in_thread(config) as (url, _):
        code = main([
            "bench", "--url", url, "--concurrency", "8", "--num-requests", str(NUM),
            "--workload", "synthetic:input=8,output=6", "--stall-timeout", "1",
            "--out", str(out), "--json",
        ])  # fmt: skip
        posts = fetch_posts(url)
    assert code == 0
    yield out, posts


@pytest.mark.slow
def test_every_attempted_request_has_one_record_with_its_kind(
    faulty_run: tuple[Path, dict[str, int]],
) -> None:
    run, posts = faulty_run
    records = _records(run)
    ids = [str(r["id"]) for r in records]
    assert len(records) == NUM and len(set(ids)) == NUM
    kinds = Counter(_kind(r) for r in records)
    for expected in FAULTS.values():
        assert kinds[expected] > 0, (expected, kinds)
    # nothing else: each record is healthy or one of the faults served
    assert set(kinds) <= {"none", *FAULTS.values()}, kinds
    # the server saw every request, and each once but a labelled resend
    assert set(posts) == set(ids)
    resent = {str(r["id"]) for r in records if "retried" in (r.get("labels") or {})}  # type: ignore[operator]
    assert {rid for rid, n in posts.items() if n > 1} == resent and len(resent) <= 1
    assert all(n <= 2 for n in posts.values())
    summary = json.loads((run / "run.json").read_text())["summary"]
    level = summary["levels"][0]
    assert level["resent"] == len(resent)
    assert level["completed"] + level["failed"] == NUM


@pytest.mark.slow
def test_a_non_streamed_answer_is_not_called_a_cut_stream(
    faulty_run: tuple[Path, dict[str, int]],
) -> None:
    records = [r for r in _records(faulty_run[0]) if r.get("fault") == "not_streamed"]
    assert records and all("stream: true" in str(r["error_text"]) for r in records)
    assert not any(r.get("fault") == "truncated" for r in _records(faulty_run[0]))


@pytest.mark.slow
def test_the_faulty_run_re_diagnoses(
    faulty_run: tuple[Path, dict[str, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    run = faulty_run[0]
    capsys.readouterr()
    code = main(["diagnose", "--from-run", str(run), "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    layers = {layer["layer"]: layer for layer in json.loads(out)["layers"]}
    # about one request in three failed: the application layer says so
    assert layers["application"]["status"] == "bottleneck", layers["application"]


def test_a_server_that_resets_every_request_sees_each_once(tmp_path: Path) -> None:
    # A reset before any answer on a fresh connection is the server's failure: it is
    # recorded, never sent again (before: 4,000 POSTs for 2,000 records).
    config = ServerConfig(behavior=Behavior(reset_before=True))
    with serve_in_thread(config) as (url, server):
        code = main([
            "bench", "--url", url, "--concurrency", "4", "--num-requests", "24",
            "--workload", "synthetic:input=8,output=4", "--out", str(tmp_path / "run"), "--json",
        ])  # fmt: skip
        posts = fetch_posts(url)
    records = _records(tmp_path / "run")
    assert code == 4  # no request of the level succeeded
    assert len(records) == 24 and all(_kind(r) == "connect:reset" for r in records)
    # one resend at most, where a kept-alive connection was in play, and labelled
    resent = [r for r in records if "retried" in (r.get("labels") or {})]  # type: ignore[operator]
    assert sum(posts.values()) == 24 + len(resent) and len(resent) <= 1
    assert server.num_requests == sum(posts.values())
    warnings = json.loads((tmp_path / "run" / "run.json").read_text())["summary"]["warnings"]
    if resent:  # the warning names what was seen, and that it was not a stale connection
        (line,) = [w for w in warnings if "kept-alive" in w]
        assert "failed again on the fresh connection" in line and "Error" in line
    else:
        assert not any("kept-alive" in w for w in warnings)


def test_a_failing_server_does_not_burn_a_closed_loop_in_a_second(tmp_path: Path) -> None:
    # Instant 503s: each user waits 50 ms, doubling to 1 s, between failures; the run
    # says so, and bench exits 4 (no request of the level succeeded).
    config = ServerConfig(behavior=Behavior(status=503))
    with serve_in_thread(config) as (url, server):
        code = main([
            "bench", "--url", url, "--concurrency", "2", "--duration", "2",
            "--workload", "synthetic:input=8,output=4", "--out", str(tmp_path / "run"), "--json",
        ])  # fmt: skip
        sent = server.num_requests
    assert code == 4
    # 2 users backing off 0.05 + 0.1 + 0.2 + 0.4 + 0.8 s: about 6 requests each in 2 s,
    # where a loop without back-off sent hundreds
    assert 2 <= sent <= 20, sent
    level = json.loads((tmp_path / "run" / "run.json").read_text())["summary"]["levels"][0]
    assert level["backoffs"] >= sent - 2


def test_a_sigkilled_server_leaves_one_record_per_request_and_a_diagnosable_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    behavior = orjson.dumps(asdict(Behavior(ttft_s=0.02, itl_s=0.01, num_tokens=20))).decode()
    command = [sys.executable, "-m", "infertriage_testing.testserver", "--behavior", behavior]
    out = tmp_path / "run"
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as server:
        assert server.stdout is not None
        url = server.stdout.readline().strip().removeprefix("listening on ")
        bench = subprocess.Popen(
            [sys.executable, "-m", "infertriage", "bench", "--url", url, "--rate", "20",
             "--num-requests", "60", "--workload", "synthetic:input=8,output=20",
             "--out", str(out), "--json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not (out / "requests.jsonl").exists() or len(_records(out)) < 10:
            assert time.monotonic() < deadline and bench.poll() is None
            time.sleep(0.05)
        server.kill()
        server.wait()
        _, err = bench.communicate(timeout=60)
    assert "Traceback" not in err, err
    records = _records(out)
    ids = [str(r["id"]) for r in records]
    assert len(ids) == 60 and len(set(ids)) == 60
    kinds = Counter(_kind(r) for r in records)
    assert kinds["none"] >= 10 and sum(n for k, n in kinds.items() if k != "none") > 0, kinds
    assert bench.returncode == 0, err  # some requests succeeded before the kill
    assert RunDir.open(out).read_info().summary.levels
    capsys.readouterr()
    assert main(["diagnose", "--from-run", str(out), "--json"]) == 0
