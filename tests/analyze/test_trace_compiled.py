"""torch.compile evidence: compiled regions in a trace, recompilations in a TORCH_LOGS log.

The log below is written by hand in the format `TORCH_LOGS=recompiles` prints
(torch/_dynamo/guards.py through the `__recompiles` artifact logger): one
`Recompiling function NAME in FILE:LINE` line per recompilation, followed by
the guard failures that triggered it, and dynamo's warning when a frame hits
its recompile limit.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from infertriage.analyze.trace import load_traces, parse_recompile_log
from infertriage.analyze.trace.compiled import get_compiled
from infertriage.api.trace import analyze_trace

RECOMPILES_LOG = """\
I0612 10:00:01.000000 1234 torch/_dynamo/eval_frame.py:400] starting the server
V0612 10:00:02.100000 1234 torch/_dynamo/guards.py:2791] [0/1] [__recompiles] Recompiling function forward in /srv/model.py:88
V0612 10:00:02.100000 1234 torch/_dynamo/guards.py:2791] [0/1] [__recompiles]     triggered by the following guard failure(s):
V0612 10:00:02.100000 1234 torch/_dynamo/guards.py:2791] [0/1] [__recompiles]     - 0/0: tensor 'L['input_ids']' size mismatch at index 0. expected 8, actual 16
V0612 10:00:03.200000 1234 torch/_dynamo/guards.py:2791] [0/2] [__recompiles] Recompiling function forward in /srv/model.py:88
V0612 10:00:03.200000 1234 torch/_dynamo/guards.py:2791] [0/2] [__recompiles]     - 0/1: tensor 'L['input_ids']' size mismatch at index 0. expected 16, actual 32
V0612 10:00:04.300000 1234 torch/_dynamo/guards.py:2791] [1/1] [__recompiles] Recompiling function sample in /srv/sampler.py:12
W0612 10:00:05.000000 1234 torch/_dynamo/convert_frame.py:906] [0/8] torch._dynamo hit config.recompile_limit (8)
"""  # noqa: E501


def test_recompile_log() -> None:
    log = parse_recompile_log(RECOMPILES_LOG)
    assert log.recompilations == 3
    assert log.functions == (("forward", 2), ("sample", 1))
    assert log.limit_hits == 1
    assert parse_recompile_log("nothing to see\n").recompilations == 0


def _trace_with_regions(path: Path) -> Path:
    events = [
        {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_0", "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "ts": 5, "dur": 3,
         "args": {"correlation": 1}},
    ]  # fmt: skip
    for i, name in enumerate(["Torch-Compiled Region: 0/0", "Torch-Compiled Region: 0/1",
                              "Torch-Compiled Region: 0/1", "Torch-Compiled Region: 1/0",
                              "CompiledFunction"]):  # fmt: skip
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "ts": i, "dur": 1})
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def test_compiled_regions_in_a_trace(tmp_path: Path) -> None:
    table = load_traces([_trace_with_regions(tmp_path / "t.json")])[0]
    compiled = get_compiled(table)
    assert compiled.num_regions == 5
    assert compiled.recompilations == 1  # frame 0, attempt 1
    assert compiled.region_ns == 5_000


def test_log_counts_win_over_the_trace(tmp_path: Path) -> None:
    trace = _trace_with_regions(tmp_path / "t.json")
    log = tmp_path / "recompiles.log"
    log.write_text(RECOMPILES_LOG)
    from_trace = analyze_trace([trace])
    assert from_trace.value("trace.recompilations") == 1
    from_log = analyze_trace([trace], log=log)
    recompilations = from_log.signal("trace.recompilations")
    assert recompilations is not None and recompilations.value == 3
    assert recompilations.source == "log"
    assert from_log.value("trace.recompile_limit_hits") == 1
    assert "kernel.recompilations" in {f.id for f in from_log.findings}
