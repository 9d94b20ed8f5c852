"""Write the JSON Schemas of run.json, diagnosis.json, SLO, scenario and JSONL workload files,
from their models, into schemas/.

    python scripts/json_schemas.py          # (re)write schemas/*.schema.json
    python scripts/json_schemas.py --check  # exit 1 naming each file that differs

Run it after changing a model of `infertriage.schemas.runinfo`, `.diagnosis`, the SLO keys of
`.thresholds`, `infertriage.twin.scenario_model` or `infertriage.workload.file_models`, and
commit the files with the change; tests/schemas/test_published.py fails while
they differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

from infertriage.api.published import json_schemas
from infertriage.schemas.published import render_schema

OUT = Path(__file__).resolve().parents[1] / "schemas"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    OUT.mkdir(exist_ok=True)
    for name, schema in json_schemas().items():
        path, text = OUT / name, render_schema(schema)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not check:
            path.write_text(text, encoding="utf-8")
    for name in stale:
        print(f"{'differs' if check else 'wrote'}: schemas/{name}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
