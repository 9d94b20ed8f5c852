"""The slowest requests joined with the server's log: by the id they were sent with, else time."""

from __future__ import annotations

import io
import time

from rich.console import Console
from tests.diagnose.evidence_helpers import make_evidence

from infertriage.analyze.logs.join import join_slowest
from infertriage.analyze.logs.records import read_records
from infertriage.diagnose import diagnose_evidence
from infertriage.report.diagnosis import render_diagnosis
from infertriage.schemas import LoggedRequest, RequestRecord, Thresholds

ANCHOR = 1_796_300_000.0  # the run's wall clock at t = 0


def _record(rid: str, sent: float, end: float, server_id: str = "") -> RequestRecord:
    return RequestRecord(id=rid, scheduled_ts=sent, sent_ts=sent, first_token_ts=sent + 0.2,
                         last_token_ts=end, end_ts=end, server_request_id=server_id)  # fmt: skip


def _stamp(t: float) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(ANCHOR + t))


def _log(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def test_lines_that_name_the_request_are_joined_by_id() -> None:
    # vLLM 0.10 with --enable-log-requests: "Received request chatcmpl-<X-Request-Id>: …"
    text = _log([
        f"INFO {_stamp(1)} [logger.py:39] Received request chatcmpl-run-a-7: params: …",
        f"INFO {_stamp(2)} [logger.py:39] Received request chatcmpl-run-a-8: params: …",
        f"INFO {_stamp(9)} [async_llm.py:270] Aborted request chatcmpl-run-a-7.",
    ])  # fmt: skip
    logs = read_records(text, ANCHOR)
    records = [_record("run-a-7", 1.0, 9.0), _record("run-a-8", 2.0, 3.0)]
    joined = join_slowest(records, logs, ANCHOR)
    assert [j.id for j in joined] == ["run-a-7", "run-a-8"]  # the slowest first
    assert joined[0].joined_by == "id" and len(joined[0].lines) == 2
    assert all("run-a-7" in line for line in joined[0].lines)
    assert joined[1].lines == (logs[1].text,)


def test_without_ids_in_the_log_the_stats_lines_of_the_requests_time() -> None:
    text = _log([
        f"INFO {_stamp(3)} [loggers.py:123] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
        "Avg generation throughput: 50.0 tokens/s, Running: 4 reqs, Waiting: 9 reqs, "
        "GPU KV cache usage: 97.0%, Prefix cache hit rate: 0.0%",
        f"INFO {_stamp(30)} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
    ])  # fmt: skip
    joined = join_slowest([_record("run-b-1", 1.0, 6.0)], read_records(text, ANCHOR), ANCHOR)
    assert joined[0].joined_by == "time"
    assert len(joined[0].lines) == 1 and "Waiting: 9 reqs" in joined[0].lines[0]


def test_the_map_lists_them_with_server_text_escaped() -> None:
    diagnosis = diagnose_evidence(make_evidence(), Thresholds()).model_copy(
        update={"slowest": (LoggedRequest(id="run-c-1", ttft_s=0.25, e2e_s=4.0, joined_by="id",
                                          lines=("Aborted request chatcmpl-run-c-1\x1b[31m",)),)}
    )  # fmt: skip
    out = io.StringIO()
    render_diagnosis(diagnosis, Console(file=out, width=200))
    shown = out.getvalue()
    assert "Slowest requests in the server's log, joined by its id:" in shown
    assert "run-c-1: TTFT 250 ms, E2E 4000 ms" in shown
    assert "\x1b[31m" not in shown
    assert diagnosis.to_json_dict()["slowest"][0]["joined_by"] == "id"  # type: ignore[index]


def test_no_log_no_join() -> None:
    assert join_slowest([_record("run-d-1", 1.0, 6.0)], [], ANCHOR) == []
