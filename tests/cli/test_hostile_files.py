"""Every command that reads a file refuses a hostile one in one sentence with exit 2.

The files are the ones a fuzzer or an unlucky copy makes: empty, random bytes, a gzip cut
short, NUL bytes, invalid UTF-8, numbers JSON cannot hold, a YAML alias bomb, nesting
100,000 deep, a folder, a FIFO (which a careless `open` waits on forever), /dev/zero (which
a careless read fills the memory with), a missing path.
The large ones (gzip bombs, padded traces, long lines) are in tests/analyze/trace,
tests/analyze/logs and tests/schemas, with their memory bounds.
"""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.schemas.inputs import MAX_SENTENCE_CHARS

_LEVELS = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
    f"&{name} [{', '.join(['*' + previous] * 9)}]"
    for name, previous in zip("bcdefghi", "abcdefgh", strict=True)
]
_BOMB = f"ttft_p95: [{', '.join(_LEVELS)}]\n"  # 9⁹ strings under a key the SLO reader knows
_FILES: dict[str, bytes] = {
    "empty": b"",
    "garbage": random.Random(30).randbytes(64 * 1024),
    "cut.json.gz": gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 500 + b"]}")[:60],
    "nul": b"\0" * 4096,
    "latin": b"caf\xe9 \xff\xfe \xed\xa0\x80\n" * 50,
    "alias_bomb.yaml": _BOMB.encode(),
    "deep.json": b"[" * 100_000 + b"]" * 100_000,
}
_URL = ["--url", "http://127.0.0.1:9", "--duration", "2"]
_PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--concurrency", "4"]
_COMMANDS = {
    "trace": ["trace", "{f}"],
    "logs": ["logs", "{f}"],
    "metrics": ["metrics", "{f}"],
    "compare": ["compare", "{f}", "{f}"],
    "report": ["report", "{f}"],
    "simulate --scenario": ["simulate", "--scenario", "{f}"],
    "diagnose --slo": ["diagnose", *_URL, "--slo", "{f}"],
    "diagnose --metrics-file": ["diagnose", "--metrics-file", "{f}"],
    "trace --log": ["trace", "{f}", "--log", "{f}"],
    "plan --model": ["plan", "--model", "{f}", "--gpu", "H100-SXM", "--concurrency", "4"],
    "plan --traffic": [*_PLAN, "--traffic", "{f}"],
    "plan --nvidia-smi-topo": [*_PLAN, "--tp", "8", "--nvidia-smi-topo", "{f}"],
    "topology --nccl-tests": [
        "topology",
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "H100-SXM",
        "--nccl-tests",
        "{f}",
    ],
}
_SPECIAL = ["folder", "fifo", "missing", "zero"]  # zero: a link to /dev/zero, which never ends


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    found = {name: root / name for name in (*_FILES, *_SPECIAL)}
    for name, data in _FILES.items():
        found[name].write_bytes(data)
    found["folder"].mkdir()
    os.mkfifo(found["fifo"])
    found["zero"].symlink_to("/dev/zero")
    return found


@pytest.mark.parametrize("command", list(_COMMANDS))
@pytest.mark.parametrize("name", [*_FILES, *_SPECIAL])
def test_a_hostile_file_is_one_sentence(
    hostile: dict[str, Path], name: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    words = [w.replace("{f}", str(hostile[name])) for w in _COMMANDS[command]]
    assert main(words) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("infertriage: error: "), err
    assert "Traceback" not in err and len(lines[0]) < MAX_SENTENCE_CHARS


@pytest.mark.parametrize(
    ("words", "needle"),
    [
        (["trace", "{dir}/inf.json"], "not valid JSON"),
        (["trace", "{dir}/nan.json"], "not valid JSON"),
        (["trace", "{dir}/far.json"], "out of range"),
        (["diagnose", *_URL, "--slo", "{dir}/nan.yaml"], "invalid value"),
        (["diagnose", *_URL, "--slo", "{dir}/inf.yaml"], "invalid value"),
        (["simulate", "--scenario", "{dir}/inf.yaml"], "ttft_p95"),
    ],
)
def test_numbers_that_are_not_numbers(
    tmp_path: Path, words: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = b'{"ph": "X", "cat": "kernel", "name": "k", "ts": %s, "dur": 1}'
    for name, ts in (("inf", b"1e999"), ("nan", b"NaN"), ("far", b"1e300")):
        (tmp_path / f"{name}.json").write_bytes(b'{"traceEvents": [' + kernel % ts + b"]}")
    (tmp_path / "nan.yaml").write_text("ttft_p95: .nan\n", encoding="utf-8")
    (tmp_path / "inf.yaml").write_text("ttft_p95: 1.0e+999\n", encoding="utf-8")
    assert main([w.replace("{dir}", str(tmp_path)) for w in words]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
