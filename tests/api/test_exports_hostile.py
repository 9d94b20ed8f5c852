"""`--export` against hostile runs and flags, through the real CLI in a subprocess: level
names that are alike as file names, `..`, unicode, 300 characters; a run where every
request failed; `--export ""`. Each level keeps a file of its own inside its format's
folder, and a flag that names no format is one sentence and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).parents[1] / "fixtures" / "runs" / "diagnose"
SRC = Path(__file__).parents[2] / "src"
NAMES = ("a/b", "a_b", "..", ".", "rate=ünï", "x" * 300, "", "level")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "infertriage", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


def _run(tmp_path: Path, change: Any) -> Path:
    """A copy of the diagnose fixture run with its records changed by `change`."""
    root = tmp_path / "run"
    shutil.copytree(FIXTURE, root)
    path = root / "requests.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    lines = [json.dumps(record) + "\n" for record in change(records)]
    path.write_text("".join(lines), encoding="utf-8")
    return root


def _named(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two records at each of NAMES' levels."""
    out = []
    for number, name in enumerate(NAMES):
        for record in records:
            out.append({**record, "id": f"{record['id']}-{number}", "labels": {"level": name}})
    return out


def test_levels_alike_as_file_names_each_keep_their_own_files(tmp_path: Path) -> None:
    root = _run(tmp_path, _named)
    done = _cli("diagnose", "--from-run", str(root), "--export", "vllm,aiperf,timeline")
    assert done.returncode == 0, done.stderr
    exports = root / "exports"
    vllm = sorted((exports / "vllm").iterdir())
    assert len(vllm) == len(NAMES)  # none overwrote another
    assert not any(path.name.startswith(".") for path in vllm)
    levels = {json.loads(path.read_text(encoding="utf-8"))["infertriage_level"] for path in vllm}
    assert levels == {name or "level" for name in NAMES}  # "" is named "level" there
    assert all(len(path.name.encode()) < 255 for path in vllm)
    aiperf = [path for path in (exports / "aiperf").iterdir() if path.is_dir()]
    assert len(aiperf) == len(NAMES)
    for folder in aiperf:  # each a folder of its own, inside aiperf/
        assert (folder / "profile_export_aiperf.json").is_file()
        assert folder.parent == exports / "aiperf" and folder.name not in {".", ".."}
    assert not (exports / "profile_export_aiperf.json").exists()  # `..` wrote nothing above
    assert len(list((exports / "timeline").glob("*.json"))) == len(NAMES)


def test_a_run_where_every_request_failed_exports_its_failures(tmp_path: Path) -> None:
    def failed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        gone = {"first_token_ts": None, "last_token_ts": None, "headers_ts": None}
        return [
            {**r, **gone, "chunks": [], "output_tokens": None, "http_status": 500,
             "error_kind": "http", "error_text": "boom"}
            for r in records
        ]  # fmt: skip

    root = _run(tmp_path, failed)
    done = _cli("diagnose", "--from-run", str(root), "--export", "vllm,aiperf,timeline")
    assert done.returncode == 0, done.stderr
    (path,) = (root / "exports" / "vllm").iterdir()
    result = json.loads(path.read_text(encoding="utf-8"))
    assert result["completed"] == 0 and result["failed"] == result["num_prompts"] > 0
    (folder,) = (root / "exports" / "aiperf").iterdir()
    lines = (folder / "profile_export.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == result["num_prompts"]


def test_an_export_flag_that_names_no_format_is_one_sentence(tmp_path: Path) -> None:
    root = _run(tmp_path, lambda records: records)
    for value in ("", ",", " , "):
        done = _cli("diagnose", "--from-run", str(root), "--export", value)
        assert done.returncode == 2, (value, done.stderr)
        assert "--export names no format" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert not (root / "exports").exists()
    done = _cli("diagnose", "--from-run", str(root), "--export", "vllm,VLLM,vllm,")
    assert done.returncode == 0, done.stderr
    assert [p.parent.name for p in (root / "exports").glob("*/*.json")] == ["vllm"]
