"""The bad-input suite: every command refuses bad input in one sentence, with exit 2.

Each case is the words of a command line; `{name}` in a word is filled from
the fixtures below (an empty, binary, truncated-gzip or garbage file, a port
that refuses connections, a loopback server). Each must exit 2 with exactly
one line on stderr (`infertriage: error: …`, naming what is wrong), no
traceback, nothing on stdout, and leave nothing that looks like a finished
run in the folder it ran in. The cases run in-process (`main([...])`); the
last few run as a real process, for the real stderr and exit code, and for
the twin, which binds a socket.
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from infertriage.cli import main
from infertriage.schemas import UserError
from infertriage_testing.testserver import Behavior, ServerConfig, serve_in_thread

# What a finished run leaves; a run directory cut short by an error must not hold them.
_FINISHED = ("diagnosis.json", "validate.json", "compare.json", "summary.csv", "signals.jsonl")
PLAN_NO_GPU = ["plan", "--model", "llama-3.1-8b", "--concurrency", "4"]
PLAN = [*PLAN_NO_GPU, "--gpu", "H100-SXM"]
BENCH = ["bench", "--url", "{refused}", "--num-requests", "2"]
LIVE = ["bench", "--url", "{live}", "--num-requests", "2"]
SMALL = ["--workload", "synthetic:input=8,output=4"]
DIAGNOSE = ["diagnose", "--url", "{refused}", "--duration", "2"]
VALIDATE = ["validate", "--url", "{refused}"]
AB = ["compare", "--url", "{refused}", "--url", "{refused}"]

# Every numeric flag with the values that are meaningless for it.
_COUNT = ("0", "-1", "nan", "inf")  # an integer of 1 or more
_AMOUNT = ("0", "-1", "nan", "inf")  # a finite number above 0
_TIME = ("0", "-1", "nan", "inf")  # a duration above 0
_PAUSE = ("-1", "nan", "inf")  # a duration or a seed of 0 or more
_NUMERIC: list[tuple[list[str], str, tuple[str, ...]]] = [
    *[(DIAGNOSE, flag, _COUNT) for flag in ("--tp", "--concurrency", "--max-model-len")],
    (DIAGNOSE, "--server-pid", ("0", "-1")),
    (["diagnose", "--url", "{refused}"], "--duration", _TIME),
    (DIAGNOSE, "--profile", _TIME),
    (["simulate"], "--rate", _AMOUNT),
    *[(["simulate"], flag, _COUNT) for flag in ("--num-requests", "--input-len", "--output-len")],
    (["simulate"], "--seed", ("-1", "nan")),
    (["simulate"], "--timeout", _TIME),
    *[
        (PLAN, flag, _COUNT)
        for flag in (
            "--max-model-len",
            "--concurrency",
            "--num-gpus",
            "--gpus-per-node",
            "--tp",
            "--pp",
            "--ep",
            "--input-len",
            "--output-len",
            "--max-num-batched-tokens",
        )
    ],
    (PLAN, "--gpu-memory-utilization", ("0", "1.5", "nan", "-1")),
    (PLAN, "--measured-itl", _TIME),
    *[(PLAN, flag, _AMOUNT) for flag in ("--measured-throughput", "--gpu-hour-cost")],
    (BENCH, "--rate", ("0", "-1", "nan", "fast")),
    (BENCH, "--concurrency", _COUNT),
    *[(BENCH, flag, _COUNT) for flag in ("--workers", "--max-concurrency", "--max-model-len")],
    (["bench", "--url", "{refused}"], "--num-requests", _COUNT),
    *[(BENCH, flag, _TIME) for flag in ("--duration", "--timeout", "--stall-timeout")],
    *[(BENCH, flag, _PAUSE) for flag in ("--think-time", "--drain-timeout", "--seed")],
    *[(VALIDATE, flag, _AMOUNT) for flag in ("--rate", "--soak-rate")],
    *[(VALIDATE, flag, _COUNT) for flag in ("--concurrency", "--num-requests")],
    (VALIDATE, "--duration", _TIME),
    (VALIDATE, "--soak", _PAUSE),
    (AB, "--rate", _AMOUNT),
    *[(AB, flag, _COUNT) for flag in ("--concurrency", "--num-requests", "--blocks")],
    (AB, "--duration", _TIME),
    (AB, "--threshold", ("0", "-10%", "nan", "inf")),
    (["metrics", "{refused}"], "--duration", _TIME),
    (["twin"], "--port", ("-1", "70000", "nan")),
    (["twin"], "--load-time", _PAUSE),
]


def _numeric_cases() -> list[object]:
    return [
        pytest.param([*words, flag, value], flag, id=f"{words[0]} {flag} {value}")
        for words, flag, values in _NUMERIC
        for value in values
    ]


CASES = [
    # the framework's usage errors, in our words
    pytest.param(["plan", "--bogus"], "has no option --bogus", id="unknown option"),
    pytest.param(["plan", "--tpp", "2"], "did you mean", id="unknown option, close match"),
    pytest.param(["diagnoze"], "did you mean diagnose", id="unknown command"),
    pytest.param(["baseline", "bogus"], "has no command 'bogus'", id="unknown subcommand"),
    pytest.param(["plan", "--gpu", "H100-SXM"], "needs --model", id="missing option"),
    pytest.param(["bench"], "needs --url", id="missing required url"),
    pytest.param(["plan", "--model"], "--model needs a value", id="option without value"),
    pytest.param(["baseline", "save"], "needs NAME", id="missing argument"),
    pytest.param(["trace"], "needs FILES", id="missing files"),
    pytest.param(["baseline", "save", "a", "b", "c"], "no argument 'c'", id="extra argument"),
    pytest.param([*PLAN, "--tp", "two"], "--tp 'two' is not a whole number", id="not an int"),
    pytest.param(["simulate", "--rate", "fast"], "--rate 'fast' is not a number", id="not a num"),
    pytest.param(["simulate", "--json=3"], "--json", id="flag with a value"),
    # URLs and servers
    pytest.param(["bench", "--url", "notaurl"], "not an http:// or https:// URL", id="bench url"),
    pytest.param(["bench", "--url", "ftp://h/v1"], "--url 'ftp://h/v1'", id="bench ftp url"),
    pytest.param(["bench", "--url", "http://"], "--url 'http://'", id="bench url without host"),
    pytest.param(["bench", "--url", "http://h:70000"], "Port out of range", id="bench url port"),
    pytest.param(["diagnose", "--url", "localhost:8000"], "--url", id="diagnose url"),
    pytest.param([*DIAGNOSE, "--metrics-url", "x"], "--metrics-url 'x'", id="metrics url"),
    pytest.param([*DIAGNOSE, "--dcgm-url", "ftp://x"], "--dcgm-url", id="dcgm url"),
    pytest.param([*DIAGNOSE, "--prometheus", "p:9090"], "--prometheus", id="prometheus url"),
    pytest.param(["validate", "--url", "nohost"], "--url 'nohost'", id="validate url"),
    pytest.param(["compare", "--url", "x", "--url", "y"], "--url 'x'", id="compare url"),
    pytest.param(["metrics", "notaurl"], "neither a URL", id="metrics url"),
    pytest.param(["metrics", "{folder}"], "not a regular file", id="metrics folder"),
    pytest.param([*BENCH], "cannot connect", id="bench refused"),
    pytest.param([*DIAGNOSE], "connection refused", id="diagnose refused"),
    pytest.param([*VALIDATE, "--num-requests", "2"], "cannot connect", id="validate refused"),
    pytest.param([*AB, "--num-requests", "4"], "cannot connect", id="compare refused"),
    pytest.param(["metrics", "{refused}"], "connection refused", id="metrics refused"),
    pytest.param([*LIVE, *SMALL, "--model", "nosuch"], "not served by", id="unknown model"),
    # names
    pytest.param([*PLAN_NO_GPU, "--gpu", "RTX-9090"], "unknown GPU 'RTX-9090'", id="plan gpu"),
    pytest.param([*PLAN_NO_GPU, "--gpu", "H10-SXM"], "did you mean H100-SXM", id="gpu close"),
    pytest.param([*DIAGNOSE, "--gpu", "RTX-9090"], "unknown GPU", id="diagnose gpu"),
    pytest.param(
        ["diagnose", "--from-run", "{folder}", "--gpu", "RTX-9090"],
        "unknown GPU",
        id="from-run gpu",
    ),
    pytest.param([*PLAN, "--model", "llama-9000"], "preset", id="plan model"),
    pytest.param([*DIAGNOSE, "--model-config", "llama-9000"], "preset", id="diagnose model"),
    pytest.param([*PLAN, "--dtype", "fp3"], "unknown dtype", id="plan dtype"),
    pytest.param(["simulate", "--scenario", "nope"], "unknown scenario", id="simulate scenario"),
    pytest.param(["twin", "--scenario", "nope"], "unknown scenario", id="twin scenario"),
    pytest.param([*DIAGNOSE, "--scenario", "nope"], "unknown scenario", id="diagnose scenario"),
    pytest.param([*VALIDATE, "--scenario", "nope"], "unknown scenario", id="validate scenario"),
    pytest.param(["simulate", "--arrivals", "bursty"], "--arrivals", id="simulate arrivals"),
    pytest.param(["simulate", "--arrival", "ramp:1"], "--arrivals must be", id="simulate ramp"),
    pytest.param(["simulate", "--stage", "8"], "--stage '8' is not RATE:DURATION", id="stage"),
    pytest.param(["simulate", "--stage", "8:0"], "not a positive duration", id="stage 0 s"),
    pytest.param(["simulate", "--stage", "x:60"], "the rate 'x'", id="stage rate"),
    pytest.param(["simulate", "--stage", "8:60", "--rate", "4"], "not both", id="stage + rate"),
    pytest.param(
        ["simulate", "--workload", "chat-mix", "--input-len", "64"], "not both", id="sim lengths"
    ),
    pytest.param(["simulate", "--workload", "nosuch"], "unknown workload", id="sim workload"),
    pytest.param(["simulate", "--workload", "trace:{missing}"], "does not exist", id="sim trace"),
    pytest.param([*BENCH, "--arrival", "bursty"], "unknown arrival", id="bench arrival"),
    pytest.param([*BENCH, "--arrival", "gamma:nan"], "burstiness", id="bench gamma nan"),
    pytest.param([*BENCH, "--endpoint", "embeddings"], "--endpoint", id="bench endpoint"),
    pytest.param([*BENCH, "--header", "nocolon"], "NAME:VALUE", id="bench header"),
    pytest.param([*PLAN, "--what-if", "bogus"], "--what-if", id="what-if syntax"),
    pytest.param([*PLAN, "--what-if", "tp=0"], "--what-if tp", id="what-if value"),
    # workloads
    pytest.param([*BENCH, "--workload", "nosuch"], "unknown workload", id="workload kind"),
    pytest.param([*BENCH, "--workload", "synthetic:bogus"], "key=value", id="workload option"),
    pytest.param([*BENCH, "--workload", "multiturn:turns=nan"], "turns", id="workload nan"),
    pytest.param([*BENCH, "--workload", "prefix:groups=-1"], "groups", id="workload negative"),
    pytest.param([*BENCH, "--workload", "jsonl:{empty}"], "is empty", id="workload empty"),
    pytest.param([*BENCH, "--workload", "jsonl:{binary}"], "not a text file", id="workload bin"),
    pytest.param([*BENCH, "--workload", "sharegpt:{gz}"], "not a text file", id="workload gz"),
    pytest.param([*BENCH, "--workload", "trace:{missing}"], "does not exist", id="workload none"),
    pytest.param([*DIAGNOSE, "--workload", "jsonl:{empty}"], "is empty", id="diagnose workload"),
    pytest.param([*VALIDATE, "--workload", "jsonl:{binary}"], "text", id="validate workload"),
    pytest.param([*AB, "--workload", "jsonl:{folder}"], "not a file", id="compare workload"),
    pytest.param([*LIVE, "--workload", "jsonl:{garbage}"], "malformed JSON", id="jsonl junk"),
    pytest.param([*LIVE, *SMALL, "--goodput", "ttft=0"], "above 0", id="goodput zero"),
    # SLOs
    pytest.param([*BENCH, "--slo", "bogus"], "not KEY=VALUE", id="slo syntax"),
    pytest.param([*BENCH, "--slo", "ttft_p95=fast"], "invalid value 'fast'", id="slo value"),
    pytest.param([*BENCH, "--slo", "ttft_p95=-5ms"], "a time above 0", id="slo negative"),
    pytest.param([*BENCH, "--slo", "ttft_p95=0"], "a time above 0", id="slo zero"),
    pytest.param([*BENCH, "--slo", "error_rate=nan"], "a share from 0 to 1", id="slo nan"),
    pytest.param([*BENCH, "--slo", "sm_active=150%"], "a share from 0 to 1", id="slo share"),
    pytest.param([*BENCH, "--slo", "throughput=inf"], "tokens/s", id="slo throughput inf"),
    pytest.param([*BENCH, "--slo", "latency=1s"], "unknown SLO 'latency'", id="slo unknown"),
    pytest.param([*DIAGNOSE, "--slo", "{empty_yaml}"], "is empty", id="slo file empty"),
    pytest.param([*DIAGNOSE, "--slo", "{binary}"], "not a text file", id="slo file binary"),
    pytest.param([*VALIDATE, "--slo", "{garbage_yaml}"], "not valid YAML", id="slo file junk"),
    pytest.param([*VALIDATE, "--slo", "{list_yaml}"], "mapping", id="slo file list"),
    pytest.param([*BENCH, "--slo", "{missing}.yaml"], "does not exist", id="slo file missing"),
    pytest.param([*BENCH, "--slo", "{missing}"], "does not exist", id="slo file missing no suffix"),
    # scenario files
    pytest.param(["simulate", "--scenario", "{empty_yaml}"], "is empty", id="scenario empty"),
    pytest.param(["twin", "--scenario", "{binary}"], "cannot read", id="scenario binary"),
    pytest.param(["simulate", "--scenario", "{garbage_yaml}"], "YAML", id="scenario junk"),
    pytest.param(["simulate", "--scenario", "{list_yaml}"], "mapping", id="scenario list"),
    pytest.param([*DIAGNOSE, "--scenario", "{empty_yaml}"], "is empty", id="diagnose scenario"),
    # trace and metrics files
    pytest.param(["trace", "{empty}"], "is empty", id="trace empty"),
    pytest.param(["trace", "{binary}"], "neither a PyTorch", id="trace binary"),
    pytest.param(["trace", "{gz}"], "truncated or corrupt gzip", id="trace truncated gzip"),
    pytest.param(["trace", "{cut_json}"], "truncated", id="trace truncated json"),
    pytest.param(["trace", "{garbage}"], "neither a PyTorch", id="trace garbage"),
    pytest.param(["trace", "{missing}"], "does not exist", id="trace missing"),
    pytest.param(["metrics", "{empty}"], "no metrics", id="metrics empty"),
    pytest.param(["metrics", "{binary}"], "not a text file", id="metrics binary"),
    pytest.param(["metrics", "{garbage}"], "not valid Prometheus", id="metrics garbage"),
    pytest.param(["diagnose", "--metrics-file", "{binary}"], "not a text file", id="mfile bin"),
    pytest.param(["diagnose", "--metrics-file", "{empty}"], "no metrics", id="mfile empty"),
    pytest.param(["diagnose", "--metrics-file", "{missing}"], "cannot read", id="mfile missing"),
    pytest.param([*DIAGNOSE, "--trace", "{empty}"], "--trace", id="diagnose trace empty"),
    pytest.param([*DIAGNOSE, "--log", "{missing}"], "--log", id="diagnose log missing"),
    pytest.param([*PLAN, "--model", "{empty}"], "not valid JSON", id="model config empty"),
    pytest.param(
        [*PLAN, "--model", "{binary}"], "not a text file (UTF-8)", id="model config binary"
    ),
    pytest.param([*BENCH, "--tokenizer", "{binary}"], "tokenizer", id="tokenizer binary"),
    # run directories and baselines
    pytest.param(["diagnose", "--from-run", "{missing}"], "not a run directory", id="from-run"),
    pytest.param(["diagnose", "--from-run", "{folder}"], "not a run directory", id="plain dir"),
    pytest.param(["baseline", "save", "x", "{folder}"], "not a run directory", id="baseline"),
    pytest.param(["compare", "nosuch", "{folder}", "--store", "{folder}"], "no baseline", id="cmp"),
    pytest.param(["compare", "{missing}", "{folder}"], "does not exist", id="compare base missing"),
    pytest.param(["compare"], "give BASE and RUN", id="compare nothing"),
    pytest.param(["compare", "--url", "{refused}"], "exactly two --url", id="compare one url"),
    pytest.param(["compare", "--store", "{folder}", "a", "b"], "no baseline", id="compare base"),
    # signals beside a run.json that does not parse: no run to compare with
    pytest.param([*DIAGNOSE, "--compare-run", "{garbled_run}"], "run.json", id="compare-run"),
    pytest.param([*DIAGNOSE, "--compare-run", "{stale_run}"], "schema 'x/0'", id="old compare-run"),
    pytest.param(["baseline", "list", "--store", "{empty}"], "is a file, not a folder", id="store"),
    pytest.param(["compare", "a", "b", "--store", "{empty}"], "a file, not a folder", id="cstore"),
    # a symbolic link that leads nowhere is said to be one, not said to be missing
    pytest.param(["trace", "{loop}"], "is a symbolic link loop", id="trace loop"),
    pytest.param(["logs", "{loop}"], "is a symbolic link loop", id="logs loop"),
    pytest.param([*DIAGNOSE, "--log", "{loop}"], "is a symbolic link loop", id="log loop"),
    pytest.param([*DIAGNOSE, "--slo", "{loop}"], "is a symbolic link loop", id="slo loop"),
    pytest.param(["diagnose", "--from-run", "{loop}"], "symbolic link loop", id="from-run loop"),
    pytest.param(["compare", "{loop}", "{folder}"], "symbolic link loop", id="compare loop"),
    pytest.param(["metrics", "{loop}"], "is a symbolic link loop", id="metrics loop"),
    pytest.param(
        ["simulate", "--scenario", "{loop}", "--num-requests", "5"],
        "is a symbolic link loop",
        id="scenario loop",
    ),
    pytest.param(
        ["plan", "--model", "{loop}", "--gpu", "H100-SXM", "--concurrency", "8"],
        "is a symbolic link loop",
        id="model loop",
    ),
    pytest.param(["metrics", "{dangling}"], "which does not exist", id="metrics dangling"),
    pytest.param(["logs", "{dangling}"], "is a symbolic link to '", id="logs dangling"),
    pytest.param([*VALIDATE, "--markdown", "{missing}/x.md"], "does not exist", id="markdown"),
    pytest.param([*VALIDATE, "--markdown", "{folder}"], "is a folder", id="markdown folder"),
    # durations in other units and shapes
    pytest.param([*DIAGNOSE[:3], "--duration", "5parsecs"], "unknown time unit", id="dur unit"),
    pytest.param([*BENCH, "--duration", "ten"], "--duration 'ten' is not a duration", id="dur"),
    pytest.param([*VALIDATE, "--soak", "1y"], "unknown time unit", id="soak unit"),
    pytest.param([*PLAN, "--measured-itl", "fast"], "--measured-itl 'fast'", id="itl"),
    *_numeric_cases(),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad-input")
    (root / "folder").mkdir()
    made = {
        "empty": ("empty.txt", b""),
        "empty_yaml": ("empty.yaml", b"# nothing but a comment\n"),
        "binary": ("binary.json", bytes(range(256)) * 4),
        "gz": ("cut.json.gz", gzip.compress(json.dumps({"traceEvents": []}).encode())[:20]),
        "garbage": ("garbage.json", b"this is not { json or metrics ][ at all\n"),
        "garbage_yaml": ("garbage.yaml", b"engine: [\n"),
        "list_yaml": ("list.yaml", b"- a\n- b\n"),
        "cut_json": ("cut.json", b'{"traceEvents": [{"ph": "X", "name": "k"'),
    }
    found = {"folder": str(root / "folder"), "missing": str(root / "missing")}
    for name, info in (("garbled_run", "{not json"), ("stale_run", '{"schema": "x/0"}')):
        (root / name).mkdir()
        (root / name / "run.json").write_text(info)
        signal = {"name": "client.throughput_tok_s", "value": 1.0, "unit": "tok/s"}
        (root / name / "signals.jsonl").write_text(json.dumps(signal) + "\n")
        found[name] = str(root / name)
    (root / "loop.log").symlink_to(root / "loop.log")  # a link to itself
    (root / "dangling.log").symlink_to(root / "gone.log")
    found |= {"loop": str(root / "loop.log"), "dangling": str(root / "dangling.log")}
    for name, (filename, data) in made.items():
        (root / filename).write_bytes(data)
        found[name] = str(root / filename)
    return found


@pytest.fixture(scope="module")
def refused() -> Iterator[str]:
    """A port bound and never listened on: every connection to it is refused, at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture(scope="module")
def live() -> Iterator[str]:
    with serve_in_thread(ServerConfig(behavior=Behavior(ttft_s=0.002, itl_s=0.001))) as (url, _):
        yield url


def _fill(words: list[str], request: pytest.FixtureRequest) -> list[str]:
    values: dict[str, str] = dict(request.getfixturevalue("files"))
    values["refused"] = request.getfixturevalue("refused")
    if any("{live}" in word for word in words):
        values["live"] = request.getfixturevalue("live")
    return [word.format(**values) for word in words]


def _finished_runs(root: Path) -> list[Path]:
    """What would pass for a finished run: its results, or a run.json that says complete."""
    found = [path for name in _FINISHED for path in root.rglob(name)]
    for info in root.rglob("run.json"):
        if json.loads(info.read_text()).get("summary", {}).get("status") != "running":
            found.append(info)
    return found


@pytest.mark.parametrize(("words", "needle"), CASES)
def test_bad_input_is_one_sentence_and_exit_2(
    words: list[str],
    needle: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # where a run directory would appear (runs/…)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(_fill(words, request))
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("infertriage: error: "), err
    assert lines[0].endswith("."), lines[0]
    assert needle in lines[0], lines[0]
    assert "Traceback" not in out + err and out == ""
    assert _finished_runs(tmp_path) == []


def test_the_suite_covers_every_command() -> None:
    commands = {str(case.values[0][0]) for case in CASES if isinstance(case.values[0], list)}
    assert len(CASES) >= 60
    for command in ("diagnose", "bench", "trace", "plan", "twin", "simulate", "metrics"):
        assert command in commands
    assert {"validate", "compare", "baseline"} <= commands


def test_an_error_that_quotes_a_line_break_is_still_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise UserError("the server said 'no\nreally\r\nno'.")

    monkeypatch.setattr("infertriage.cli.simulate.api.simulate", refuse)
    assert main(["simulate"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["infertriage: error: the server said 'no really no'."]


# --- the same units in every command: 30 (seconds), 30s, 2m, 500ms -------------------------

_BENCH_TIMES = ("--duration", "--timeout", "--stall-timeout", "--drain-timeout", "--think-time")
_TIME_OPTIONS = [
    (["diagnose", "--url", "{refused}"], "--duration"),
    (DIAGNOSE, "--profile"),
    *[(BENCH, flag) for flag in _BENCH_TIMES],
    ([*VALIDATE, "--num-requests", "2"], "--duration"),
    ([*VALIDATE, "--num-requests", "2"], "--soak"),
    ([*AB, "--num-requests", "4"], "--duration"),
    (["metrics", "{refused}"], "--duration"),
    (["twin", "--port", "70000"], "--load-time"),
]


@pytest.mark.parametrize("value", ["30", "30s", "2m", "500ms"])
@pytest.mark.parametrize(
    ("words", "flag"), [pytest.param(w, f, id=f"{w[0]} {f}") for w, f in _TIME_OPTIONS]
)
def test_every_time_option_takes_the_same_units(
    words: list[str],
    flag: str,
    value: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(_fill([*words, flag, value], request)) == 2  # the refused port, not the time
    line = capsys.readouterr().err.strip()
    assert flag not in line and "\n" not in line, line


# --- as a real process: the real stderr and exit code, and the twin's socket ----------------


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _process(*words: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "infertriage", *words]
    return subprocess.run(command, cwd=cwd, check=False, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("words", "needle"),
    [
        pytest.param(["twin", "--port", "70000"], "from 0 to 65535", id="twin port range"),
        pytest.param(["twin", "--port", "{busy}"], "is in use", id="twin port in use"),
        pytest.param(["twin", "--port", "0", "--host", "8.8.8.8"], "not an address", id="host"),
        pytest.param(["twin", "--port", "0", "--host", "no.such.invalid"], "resolve", id="host?"),
        pytest.param(["simulate", "--rate", "nan"], "--rate must be a positive", id="rate nan"),
        pytest.param(["plan", "--tpp", "2"], "has no option --tpp", id="usage error"),
    ],
)
def test_bad_input_in_a_real_process(
    words: list[str], needle: str, busy_port: int, tmp_path: Path
) -> None:
    result = _process(*[w.format(busy=busy_port) for w in words], cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("infertriage: error: "), result.stderr
    assert needle in lines[0], lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_binary_metrics_file_in_a_real_process(tmp_path: Path) -> None:
    scrape = tmp_path / "scrape.txt"
    scrape.write_bytes(b"\xff\xfe\x00vllm:num_requests_running 1\n")
    result = _process("diagnose", "--metrics-file", str(scrape), cwd=tmp_path)
    assert result.returncode == 2 and "not a text file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
