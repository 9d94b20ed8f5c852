"""Over-saturation caught while it happens, against the real twin: a rate far above the
queue-bound twin's capacity stops early with the verdict (records kept, in the terminal,
the JSON and run.json); a comfortable rate runs to its end with none."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from infertriage.api.bench import run_bench
from infertriage.api.specs import BenchSpec
from infertriage.cli.app import app
from infertriage.loadgen.saturation import MIN_ELAPSED_S
from infertriage.schemas import RequestRecord, RunDir
from infertriage.twin.process import TwinProcess

# queue-bound: 8 seats in the batch; 128 output tokens hold one for about a second, so the
# twin completes about 8 req/s
WORKLOAD = "synthetic:input=64,output=128"
LEVEL_S = 40  # the level asked for; the saturated one is stopped long before


def test_an_over_saturated_level_stops_early_with_its_verdict(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with TwinProcess("queue-bound", load_time_s=0.1) as twin:
        cli = CliRunner().invoke(
            app,
            ["bench", "--url", twin.url, "--rate", "40", "--duration", str(LEVEL_S),
             "--drain-timeout", "2", "--workload", WORKLOAD, "--no-tokenize-check",
             "--out", str(out)],
        )  # fmt: skip
    assert cli.exit_code == 0, cli.output
    assert "over-saturated, stopped early" in cli.output and "the queue grew" in cli.output
    run = RunDir.open(out)
    records = list(run.iter_records(run.requests, RequestRecord))
    info = run.read_info()
    assert info.summary.status == "complete"
    level = info.summary.levels[0]
    verdict = level["saturation"]
    assert isinstance(verdict, dict) and verdict["rule"] == "queue"
    assert level["over_saturated"] is True and level["stable"] is False
    at_s = verdict["at_s"]
    assert isinstance(at_s, float) and MIN_ELAPSED_S <= at_s < LEVEL_S / 2
    assert verdict["queue_end"] > verdict["queue_start"]
    assert verdict["achieved_rate"] < verdict["target_rate"]
    # every request sent before the stop is on disk, and nothing was sent after it
    assert len(records) == level["num_requests"] and len(records) < 40 * LEVEL_S / 2
    assert max(r.sent_ts for r in records) - min(r.scheduled_ts for r in records) < LEVEL_S / 2
    assert any("stopped early" in w for w in info.summary.warnings)


def test_a_comfortable_level_runs_to_its_end(tmp_path: Path) -> None:
    level_s = 14.0
    with TwinProcess("queue-bound", load_time_s=0.1) as twin:
        result = run_bench(
            BenchSpec(
                url=twin.url,
                rates=[4],
                duration_s=level_s,
                workload=WORKLOAD,
                check_tokens=False,
                out=tmp_path / "run",
            )
        )
    level = result.levels[0]
    assert level.saturation is None and level.stable is True
    assert not [w for w in result.warnings if "stopped early" in w]
    run = RunDir.open(tmp_path / "run")
    records = run.iter_records(run.requests, RequestRecord)
    scheduled = sorted(r.scheduled_ts for r in records)
    assert scheduled[-1] - scheduled[0] > MIN_ELAPSED_S  # issued past the detector's minimum
    document = json.loads((tmp_path / "run" / "run.json").read_text())
    assert document["summary"]["levels"][0]["saturation"] is None


def test_each_worker_judges_its_own_share(tmp_path: Path) -> None:
    with TwinProcess("queue-bound", load_time_s=0.1) as twin:
        result = run_bench(
            BenchSpec(
                url=twin.url,
                rates=[40],
                workers=2,
                duration_s=LEVEL_S,
                drain_timeout_s=2,
                workload=WORKLOAD,
                check_tokens=False,
                out=tmp_path / "run",
            )
        )
    level = result.levels[0]
    assert level.saturation is not None and level.saturation.rule == "queue"
    assert level.saturation.at_s < LEVEL_S / 2 and level.stable is False
    assert level.client.num_workers == 2
    assert level.validity is not None and not level.validity.valid  # no figure of it holds
    assert level.summary.num_requests < 40 * LEVEL_S / 2
    assert any("workers judges its share" in w for w in result.warnings)
