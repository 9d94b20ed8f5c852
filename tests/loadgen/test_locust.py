"""`--locust-workers N`: the load on a Locust master and workers, records merged into one run.

The master and workers are real processes talking over Locust's own messaging
on loopback; the server is the truth-style test server in a process of its own
(its `/_log` holds the perf_counter_ns of every first and last token write).
Locust is never imported here: it patches its process for gevent.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.loadgen.locust import run_locust
from infertriage.loadgen.request import ClientConfig
from infertriage.loadgen.runner import LoadPlan
from infertriage.schemas import RequestRecord, RunDir, UserError
from infertriage.workload import Schedule, make_offsets, make_specs, parse_arrivals, parse_workload
from infertriage_testing.testserver import (
    Behavior,
    fetch_log,
    fetch_posts,
    serve_in_process,
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("locust") is None,
    reason="locust is not installed (pip install 'infertriage[distributed]')",
)

TTFT_S, ITL_S, TOKENS = 0.100, 0.010, 20


def _records(root: Path) -> list[RequestRecord]:
    run = RunDir.open(root)
    return list(run.iter_records(run.requests, RequestRecord))


def _bench(url: str, out: Path, **fields: object) -> BenchSpec:
    return BenchSpec(
        url=url,
        concurrencies=[4],
        out=out,
        workload=f"synthetic:input=16,output={TOKENS}",
        check_tokens=False,
        **fields,  # type: ignore[arg-type]
    )


def test_two_locust_workers_agree_with_the_native_client(tmp_path: Path) -> None:
    with serve_in_process(Behavior(ttft_s=TTFT_S, itl_s=ITL_S, num_tokens=TOKENS)) as url:
        native = run_bench(_bench(url, tmp_path / "native", num_requests=40))
        locust = run_bench(_bench(url, tmp_path / "locust", num_requests=40, locust_workers=2))
        truth = fetch_log(url)
    a, b = native.levels[0].summary, locust.levels[0].summary
    records = _records(tmp_path / "locust")
    # No record lost: every request of the schedule, once, in the one requests.jsonl.
    assert b.num_ok == 40 and len(records) == 40 and len({r.id for r in records}) == 40
    assert locust.levels[0].client.num_workers == 2
    assert b.ttft is not None and a.ttft is not None and b.tpot is not None and a.tpot is not None
    # Agreement with the native client measured in the same test, on the same server.
    assert b.ttft.p50 == pytest.approx(a.ttft.p50, rel=0.05)
    assert b.tpot.mean == pytest.approx(a.tpot.mean, rel=0.05)
    # And with the server's own write times, through the wall-clock start the workers got:
    # the first-token stamps within 2 ms of the writes, the TPOT within 0.2 ms.
    run = RunDir.open(tmp_path / "locust")
    base_ns = run.read_info().environment.perf_counter_start_ns
    stamp_errors, tpot_errors = [], []
    for record in records:
        first_ns, last_ns, tokens = truth[record.id]
        stamp_errors.append((record.first_token_ts or 0.0) - (first_ns - base_ns) * 1e-9)
        true_tpot = (last_ns - first_ns) * 1e-9 / (tokens - 1)
        assert record.first_token_ts is not None and record.last_token_ts is not None
        got_tpot = (record.last_token_ts - record.first_token_ts) / (tokens - 1)
        tpot_errors.append(abs(got_tpot - true_tpot))
    assert abs(float(np.median(stamp_errors))) < 0.002
    assert float(np.median(tpot_errors)) < 0.0002
    info = run.read_info()
    assert info.environment.load_engine == "locust"
    assert info.environment.locust_workers == 2


def _kill_one_worker_when_records_flow(requests: Path, killed: list[int]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if requests.is_file() and requests.read_bytes().count(b"\n") >= 6:
            break
        time.sleep(0.05)
    workers = [proc for proc in psutil.Process().children(recursive=True) if _is_worker(proc)]
    if workers:
        killed.append(workers[0].pid)
        workers[0].kill()


def _is_worker(proc: psutil.Process) -> bool:
    try:
        command = proc.cmdline()
    except psutil.Error:  # gone meanwhile
        return False
    return "infertriage.loadgen.locust" in command and "worker" in command


def test_a_killed_worker_is_reported_and_its_records_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    killed: list[int] = []
    killer = threading.Thread(
        target=_kill_one_worker_when_records_flow, args=(out / "requests.jsonl", killed)
    )
    with serve_in_process(Behavior(ttft_s=0.02, itl_s=0.01, num_tokens=TOKENS)) as url:
        killer.start()
        result = run_bench(_bench(url, out, duration_s=8.0, locust_workers=2))
        killer.join()
    assert killed, "no Locust worker process was found to kill"
    lost = [w for w in result.warnings if "was lost mid-run" in w]
    assert len(lost) == 1, result.warnings
    assert "warning: Locust worker" in capsys.readouterr().err
    records = _records(out)
    assert len(records) == len({r.id for r in records})
    # Every record the lost worker had sent is in requests.jsonl, beside the survivor's.
    lost_worker = lost[0].split("Locust worker ")[1].split(" ")[0]
    sent_by_lost = int(lost[0].split(" records it had sent")[0].rsplit(" ", 1)[1])
    by_lost = [r for r in records if r.labels.get("locust_worker") == lost_worker]
    assert sent_by_lost > 0 and len(by_lost) == sent_by_lost
    assert len(records) > sent_by_lost
    assert result.levels[0].client.num_workers == 1  # the survivor's report
    info = RunDir.open(out).read_info()
    assert any("was lost mid-run" in w for w in info.summary.warnings)


def test_locust_flags_refused_in_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="give one of them"):
        run_bench(BenchSpec(url="http://127.0.0.1:9", workers=2, locust_workers=2))
    with pytest.raises(UserError, match="needs --locust-workers"):
        run_bench(BenchSpec(url="http://127.0.0.1:9", locust_master_host="0.0.0.0"))


def test_an_open_loop_keeps_every_deadline_across_workers(tmp_path: Path) -> None:
    with serve_in_process(Behavior(ttft_s=0.005, itl_s=0.002, num_tokens=6)) as url:
        result = run_bench(
            BenchSpec(
                url=url,
                rates=[40.0],
                num_requests=30,
                locust_workers=2,
                seed=3,
                out=tmp_path / "run",
                workload="synthetic:input=8,output=6",
                check_tokens=False,
            )
        )
    assert result.levels[0].summary.num_ok == 30
    records = _records(tmp_path / "run")
    assert len({r.id for r in records}) == 30
    assert {r.labels["locust_worker"] for r in records} == {"0", "1"}  # one issuer each
    # The union of the two issuers' deadlines is the one precomputed schedule, on one clock.
    scheduled = np.sort([r.scheduled_ts for r in records])
    expected = make_offsets(parse_arrivals("poisson", 40.0), num_requests=30, seed=3)
    assert scheduled - scheduled[0] == pytest.approx(expected, abs=1e-5)
    lags = [r.dispatch_lag_s for r in records]
    assert float(np.median(lags)) < 0.02 and max(lags) < 0.5  # a loaded host delays some sends


def test_workers_started_by_hand_join_the_master_host(tmp_path: Path) -> None:
    """The multi-host form on loopback: bench starts only the master, one per level; the
    workers, started as a user starts them on other hosts, join each in turn and take the
    API key from their own environment (it never travels); the header values travel and
    are stored nowhere."""
    port = _free_port()
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-key"}
    command = [sys.executable, "-m", "infertriage.loadgen.locust", "worker"]
    command += ["--master-host", "127.0.0.1", "--master-port", str(port)]
    workers = [subprocess.Popen(command, env=env) for _ in range(2)]
    try:
        with serve_in_process(Behavior(ttft_s=0.005, itl_s=0.002), api_key="sk-test-key") as url:
            spec = _bench(url, tmp_path / "run", num_requests=12, locust_workers=2)
            spec = spec.model_copy(update={"concurrencies": (2, 4)})  # two levels, two masters
            client = spec.client.model_copy(
                update={"api_key": "sk-test-key", "headers": ("X-Team-Token: tt-secret",)}
            )
            result = run_bench(
                spec.model_copy(
                    update={"client": client, "locust_master_host": f"127.0.0.1:{port}"}
                )
            )
        assert all(proc.poll() is None for proc in workers)  # they serve run after run
    finally:
        for proc in workers:
            proc.terminate()
            proc.wait(timeout=20)
    # The same two workers joined the master of each level.
    assert [level.summary.num_ok for level in result.levels] == [12, 12]
    assert [level.client.num_workers for level in result.levels] == [2, 2]
    # The key and header values were sent, never stored: no file of the run holds them.
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"sk-test-key" not in data and b"tt-secret" not in data, path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_stop_records_what_was_in_flight(tmp_path: Path) -> None:
    """Ctrl-C (bench's `stop`) reaches every worker through the master: each records its
    requests in flight as `client:cancelled`, with what they measured, and the run ends."""
    specs = make_specs(parse_workload("synthetic:input=8,output=200"), 40)
    records: list[RequestRecord] = []
    with serve_in_process(Behavior(ttft_s=0.01, itl_s=0.02, num_tokens=200)) as url:
        config = ClientConfig(base_url=url + "/v1", model="test-model")
        plan = LoadPlan(Schedule(specs, None), concurrency=4, id_prefix="s")
        run = run_locust(
            plan, config, 2, master_host=None, clock_start_ns=time.perf_counter_ns(),
            sink=records.append, log_dir=tmp_path / "locust", stop=_MidStream(url),
        )  # fmt: skip
        posts = fetch_posts(url)
    assert run.interrupted and not run.lost and len(run.reports) == 2
    cancelled = [r for r in records if r.fault == "cancelled"]
    assert len(cancelled) == 4 and all(r.chunks for r in cancelled)  # what they had measured
    # Every request the server received has its one record; none was sent after the stop.
    assert sorted(r.id for r in records) == sorted(posts)


class _MidStream:
    """True half a second after the server has received all four users' first requests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.since: float | None = None

    def __call__(self) -> bool:
        if self.since is None and len(fetch_posts(self.url)) >= 4:
            self.since = time.monotonic()
        return self.since is not None and time.monotonic() - self.since > 0.5


def test_a_worker_settles_its_drain_by_the_runners_rule(tmp_path: Path) -> None:
    """`runner.drain_settled` on a Locust worker: nine short streams done, the tenth (20 s)
    is cut once it has its first token rather than waited for up to the 30 s drain."""
    specs = make_specs(parse_workload("synthetic:input=8,output=5"), 10)
    schedule = Schedule((*specs[:9], dataclasses.replace(specs[9], max_tokens=2000)), np.zeros(10))
    records: list[RequestRecord] = []
    with serve_in_process(Behavior(ttft_s=0.01, itl_s=0.01)) as url:
        config = ClientConfig(base_url=url + "/v1", model="test-model")
        plan = LoadPlan(schedule, duration_s=0.2, drain_timeout_s=30.0, drain_settle_share=0.9,
                        id_prefix="s")  # fmt: skip
        run_locust(
            plan, config, 1, master_host=None, clock_start_ns=time.perf_counter_ns(),
            sink=records.append, log_dir=tmp_path / "locust",
        )  # fmt: skip
    cut = [r for r in records if not r.ok]
    assert len(records) == 10 and [r.id for r in cut] == ["s-9"]
    assert cut[0].fault == "run_deadline" and cut[0].first_token_ts is not None
    assert sum(c.num_tokens for c in cut[0].chunks) < 300  # cut within 3 s, not after 20
