"""Issue 34's new paths as a hostile user meets them: the goodput search cut short.

A loopback server answers every request at once; the SLO (TTFT ≤ 1 s) holds at every
rate. Ctrl-C in the middle of the search's first rate must not let that rate's partial
load (cut before any queue could build) count as a rate that held: the search says it
was interrupted, reports no rate it did not run to its end, and every record is kept.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec, ClientSpec
from infertriage.report.maxrate import max_rate_headline, max_rate_to_json
from infertriage.schemas import RequestRecord, RunDir
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
