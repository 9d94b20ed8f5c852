"""monitor-config's Grafana dashboard: built with grafana-foundation-sdk, read back by it.

The JSON must parse back through the SDK's own `Dashboard.from_json` (its
schema), keep one row per layer in order, put the SLO lines where `--slo`
says, show GPU util beside SM, tensor and DRAM active in one panel, and
query only series the rules record or the engine and dcgm-exporter export.
"""

from __future__ import annotations

import json
import re

import pytest

from infertriage.collect.adapters.dcgm import DCGM
from infertriage.engines import TGI, VLLM
from infertriage.report.monitoring import AlertLimits, Recorded, Timing, make_monitor_config
from infertriage.schemas import Thresholds

models = pytest.importorskip("grafana_foundation_sdk.models.dashboard")


def _board(thresholds: Thresholds) -> dict[str, object]:
    config = make_monitor_config(VLLM, AlertLimits.of(thresholds), Timing())
    return dict(json.loads(config.files["grafana_dashboard.json"]))


def _panels(board: dict[str, object]) -> list[dict[str, object]]:
    return [p for p in board["panels"] if p["type"] != "row"]  # type: ignore[attr-defined,index]


def test_the_dashboard_reads_back_through_the_sdk_with_a_row_per_layer() -> None:
    board = _board(Thresholds())
    parsed = models.Dashboard.from_json(board)
    assert parsed.title == "infertriage: vLLM serving" and parsed.uid == "infertriage-serving"
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]  # type: ignore[attr-defined,index]
    assert [r.split(":")[0] for r in rows] == [
        "application",
        "scheduling",
        "memory",
        "hardware",
        "fleet",
    ]
    assert json.loads(json.dumps(parsed.to_json(), default=lambda o: o.to_json()))["panels"]


def test_slo_lines_come_from_the_slo() -> None:
    board = _board(Thresholds(ttft_p95_s=0.3, itl_p95_s=0.04))
    by_title = {p["title"]: p for p in _panels(board)}
    for title, line in (("TTFT (SLO line)", 0.3), ("ITL (SLO line)", 0.04)):
        config = by_title[title]["fieldConfig"]["defaults"]  # type: ignore[index]
        steps = config["thresholds"]["steps"]
        assert steps[-1]["value"] == pytest.approx(line)
        assert config["custom"]["thresholdsStyle"]["mode"] == "dashed"
        assert config["unit"] == "s"


def test_util_lies_panel_and_every_query_names_a_known_series() -> None:
    board = _board(Thresholds())
    panels = _panels(board)
    util = next(p for p in panels if "util lies" in str(p["title"]))
    exprs = [t["expr"] for t in util["targets"]]  # type: ignore[union-attr,index]
    wanted = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
    for name in (*wanted, "DCGM_FI_PROF_DRAM_ACTIVE"):
        assert any(name in e for e in exprs), name
    known = {r.value for r in Recorded} | {
        s.raw for t in (*VLLM.metrics, DCGM) for m in t.mappings for s in m.sources
    }
    for panel in panels:
        for target in panel["targets"]:  # type: ignore[attr-defined]
            names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", target["expr"]))
            series = {n for n in names if ":" in n or n.startswith("DCGM_")}
            assert series and series <= known, (panel["title"], target["expr"])


def test_an_engine_without_kv_metrics_leaves_its_panels_out_and_says_why() -> None:
    config = make_monitor_config(TGI, AlertLimits.of(Thresholds()), Timing())
    titles = {p["title"] for p in json.loads(config.files["grafana_dashboard.json"])["panels"]}
    assert "KV cache usage" not in titles and "Tokens/s" in titles
    left = {lo.what: lo.reason for lo in config.left_out}
    assert left["InferTriageKVCacheFull"].startswith("TGI exports no KV-cache metrics")
    assert "TTFT (SLO line)" in left
