"""`--export aiperf` loads in AIPerf itself: its pydantic models and its plot `DataLoader`.

AIPerf is not a dependency: it runs from a side virtual environment, never the
project's, made with

    python3.11 -m venv /tmp/export-venv && /tmp/export-venv/bin/pip install aiperf==0.13.0

(or named by INFERTRIAGE_AIPERF_PYTHON). Without one the test skips; the format
checks of tests/report/test_exports.py run everywhere. vLLM has no reader class for
its result JSON (`vllm bench serve` writes a plain dict), and installing it brings
PyTorch: its shape is checked there, from its source.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.report.test_exports import _level

from infertriage.report.exports import write_exports
from infertriage.schemas.exports import ExportFormat

READER = Path(__file__).with_name("aiperf_reader.py")
PYTHON = Path(os.environ.get("INFERTRIAGE_AIPERF_PYTHON", "/tmp/export-venv/bin/python"))


def _aiperf_python() -> Path:
    if not PYTHON.is_file():
        pytest.skip(f"no side venv with aiperf at {PYTHON}")
    probe = subprocess.run(
        [str(PYTHON), "-c", "import aiperf"], capture_output=True, check=False, timeout=120
    )
    if probe.returncode != 0:
        pytest.skip(f"aiperf does not import in {PYTHON}")
    return PYTHON


@pytest.mark.slow
def test_aiperf_reads_our_export(tmp_path: Path) -> None:
    python = _aiperf_python()
    write_exports(tmp_path, [_level()], (ExportFormat.AIPERF,))
    folder = tmp_path / "exports" / "aiperf" / "concurrency_2"
    done = subprocess.run(
        [str(python), str(READER), str(folder)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read["schema_version"] == "1.4" and read["request_count"] == 3.0
    assert read["records"] == 4 and read["errors"] == 1 and read["loaded_rows"] == 4
    assert read["ttft_unit"] == "ms" and read["ttft_avg_ms"] == pytest.approx(30.0)
    assert sorted(read["loaded_ttft_ms"]) == pytest.approx([20.0, 30.0, 40.0])
