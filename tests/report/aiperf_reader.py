"""Load an AIPerf export folder with AIPerf's own readers; run by the side venv's Python.

    python tests/report/aiperf_reader.py FOLDER

Exit 0 and one JSON line (what was read) when AIPerf's models and its plot `DataLoader`
accept `profile_export_aiperf.json` and `profile_export.jsonl`; an exception otherwise.
Not collected by pytest (no `test_` prefix); tests/report/test_exports_tools.py runs it
where /tmp/export-venv (or $INFERTRIAGE_AIPERF_PYTHON) has aiperf installed.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

import aiperf
from aiperf.common.models import MetricRecordInfo
from aiperf.common.models.export_models import JsonExportData
from aiperf.plot.core.data_loader import DataLoader


def main(folder: Path) -> None:
    logging.disable(logging.WARNING)
    summary = JsonExportData.model_validate_json(
        (folder / "profile_export_aiperf.json").read_text(encoding="utf-8")
    )
    lines = (folder / "profile_export.jsonl").read_text(encoding="utf-8").splitlines()
    records = [MetricRecordInfo.model_validate_json(line) for line in lines if line]
    run = DataLoader().load_run(folder)
    ttft = summary.time_to_first_token
    rows = run.requests
    loaded = [] if rows is None else [float(v) for v in rows.get("time_to_first_token", [])]
    print(
        json.dumps(
            {
                "aiperf": aiperf.__version__,
                "schema_version": summary.schema_version,
                "request_count": summary.request_count.avg if summary.request_count else None,
                "ttft_avg_ms": ttft.avg if ttft else None,
                "ttft_unit": ttft.unit if ttft else None,
                "records": len(records),
                "errors": sum(1 for r in records if r.error is not None),
                "loaded_rows": 0 if rows is None else len(rows),
                "loaded_ttft_ms": [v for v in loaded if not math.isnan(v)],
            }
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
