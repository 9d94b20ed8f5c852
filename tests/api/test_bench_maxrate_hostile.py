"""Issue 34's goodput search as a hostile user meets it, on loopback servers.

Ctrl-C in the middle of the search's first rate must not let that rate's partial load
(cut before any queue could build) count as a rate that held: the search says it was
interrupted, reports no rate it did not run to its end, and every record is kept. A
workload that replays its own timestamps is refused before the probe, in a sentence that
names what to change; a server whose outputs are short at every rate ends the search
after one step, with that reason.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from infertriage.api.bench import run_bench
from infertriage.api.maxrate import probe_level
from infertriage.api.specs import BenchSpec, ClientSpec
from infertriage.report.maxrate import max_rate_headline, max_rate_to_json
from infertriage.schemas import RequestRecord, RunDir, UserError
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread


class _CtrlCInFirstStep:
    """Sends this process SIGINT once `after` requests of the first rate step finished."""

    def __init__(self, after: int) -> None:
        self.after, self.seen, self.sent = after, 0, False

    def phase_started(
        self, name: str, *, duration_s: float | None = None, num_requests: int | None = None
    ) -> None:
        pass

    def request_finished(self, record: RequestRecord) -> None:
        if self.sent or not record.labels.get("level", "").startswith("rate="):
            return
        self.seen += 1
        if self.seen >= self.after:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)

    def phase_ended(self, name: str, *, interrupted: bool = False) -> None:
        pass


def test_ctrl_c_mid_step_does_not_judge_the_partial_step(tmp_path: Path) -> None:
    behavior = Behavior(ttft_s=0.005, itl_s=0.001, num_tokens=4)
    with serve_in_thread(ServerConfig(behavior=behavior)) as (url, _):
        result = run_bench(
            BenchSpec(
                url=url,
                find_max_rate=True,
                goodput="ttft=1s",
                max_concurrency=4,
                num_requests=400,
                out=tmp_path / "run",
                workload="synthetic:input=8,output=4",
                client=ClientSpec(endpoint="completions"),
                check_tokens=False,
            ),
            observer=_CtrlCInFirstStep(after=80),
        )
    assert result.interrupted
    search = result.max_rate
    assert search is not None
    assert search.steps == () and search.max_rate is None, search.steps
    assert search.interrupted
    assert "interrupted" in search.why
    assert "interrupted" in max_rate_headline(search).plain
    saved = max_rate_to_json(search)
    assert saved is not None and saved["interrupted"] is True and saved["max_rate"] is None
    run = RunDir.open(tmp_path / "run")
    assert run.read_info().summary.status == "interrupted"  # type: ignore[union-attr]
    levels = {r.labels["level"] for r in run.iter_records(run.requests, RequestRecord)}
    assert any(name.startswith("rate=") for name in levels)  # the cut step's records kept


def _search_spec(url: str, tmp_path: Path, workload: str) -> BenchSpec:
    return BenchSpec(
        url=url,
        find_max_rate=True,
        goodput="ttft=1s",
        max_concurrency=4,
        num_requests=40,
        out=tmp_path / "run",
        workload=workload,
        client=ClientSpec(endpoint="completions"),
        check_tokens=False,
    )


def _jsonl(path: Path, *, stamps: bool) -> Path:
    lines = [
        {"input_length": 8, "output_length": 4, **({"timestamp": 0.1 * i} if stamps else {})}
        for i in range(20)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("kind", ["trace", "jsonl"])
def test_a_replayed_workload_is_refused_before_the_probe(tmp_path: Path, kind: str) -> None:
    trace = _jsonl(tmp_path / "trace.jsonl", stamps=True)
    with serve_in_thread(ServerConfig()) as (url, server):
        with pytest.raises(UserError, match="replay=false") as caught:
            run_bench(_search_spec(url, tmp_path, f"{kind}:{trace}"))
        assert server.num_requests == 0  # refused before any load
    assert "--rate" not in str(caught.value)  # the user gave no --rate
    assert not (tmp_path / "run").exists()


def test_a_jsonl_without_timestamps_or_with_replay_off_is_searched(tmp_path: Path) -> None:
    plain = _jsonl(tmp_path / "plain.jsonl", stamps=False)
    stamped = _jsonl(tmp_path / "stamped.jsonl", stamps=True)
    for workload in (f"jsonl:{plain}", f"jsonl:{stamped},replay=false"):
        spec = _search_spec("http://127.0.0.1:9", tmp_path, workload)
        assert probe_level(spec).name.startswith("probe")


def test_outputs_cut_short_at_every_rate_end_the_search_after_one_step(tmp_path: Path) -> None:
    """A server that ignores `ignore_eos` (4 tokens of the 64 asked): every step fails its
    output-length check, which no lower rate passes; the search says so after one step
    rather than shrinking the rate for ten ever-longer levels."""
    behavior = Behavior(ttft_s=0.005, itl_s=0.001, num_tokens=4)
    with serve_in_thread(ServerConfig(behavior=behavior)) as (url, _):
        result = run_bench(_search_spec(url, tmp_path, "synthetic:input=8,output=64"))
    search = result.max_rate
    assert search is not None and search.max_rate is None
    assert len(search.steps) == 1 and len(result.levels) == 2, search.steps
    assert "output lengths" in search.why and "no rate held" in search.why
    assert "output lengths" in max_rate_headline(search).plain
