"""`--out` on a directory that holds a run: refused in one sentence, or replaced with `--force`."""

from __future__ import annotations

from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.schemas import RequestRecord, RunDir
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

DEAD = "http://127.0.0.1:9"  # refused before any connection is tried
SMALL = ["--workload", "synthetic:input=8,output=5"]
COMMANDS = {
    "bench": ["bench", "--url", DEAD, "--num-requests", "3"],
    "diagnose": ["diagnose", "--url", DEAD, "--duration", "3"],
    "validate": ["validate", "--url", DEAD, "--duration", "3s"],
    "compare": ["compare", "--url", DEAD, "--url", DEAD, "--num-requests", "4"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("marker", ["run.json", "requests.jsonl"])
def test_an_existing_run_is_refused_before_any_load(
    command: str, marker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "old"
    out.mkdir()
    (out / marker).write_text('{"old": true}\n')
    assert main([*COMMANDS[command], "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "already holds a run" in lines[0] and "--force" in lines[0]
    assert sorted(p.name for p in out.iterdir()) == [marker]
    assert (out / marker).read_text() == '{"old": true}\n'


def test_force_replaces_the_old_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    fast = ServerConfig(behavior=Behavior(ttft_s=0.005, itl_s=0.002))
    with serve_in_thread(fast) as (base, _):
        args = ["bench", "--url", base, *SMALL, "--out", str(out), "--json"]
        assert main([*args, "--num-requests", "5"]) == 0
        (out / "mine.txt").write_text("left from before")
        assert main([*args, "--num-requests", "3"]) == 2
        assert main([*args, "--num-requests", "3", "--force"]) == 0
    run = RunDir.open(out)
    assert len(list(run.iter_records(run.requests, RequestRecord))) == 3
    assert run.read_info().config["num_requests"] == 3
    assert not (out / "mine.txt").exists()
