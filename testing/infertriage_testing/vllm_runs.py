"""Real vLLM-on-H100 load stages (inference-perf), read as the twin and `plan` need them.

The runs live in `$INFERTRIAGE_FIXTURES/calibration/vllm-h100-inference-perf` (else
`../shared/fixtures/...` beside the project; see SOURCES.md there): 16 experiments of
kubernetes-sigs/inference-perf driving a real vLLM server on H100 GPUs (Llama-2-7B TP 1,
Llama-2-70B TP 4, Mixtral-8x7B TP 2, CodeLlama-34B TP 2), constant arrivals, streaming
completions with `ignore_eos`, shared-prefix prompts (G groups × P prompts, cycled).

What each stage gives, as measured (never as any tool computed it):

- `ttft_s`, `e2e_s`: the means of inference-perf's successes;
- `token_interval_s`: `(E2E − TTFT) / (output − 1)` with `output` the `max_tokens` asked
  (`ignore_eos`: the server produced exactly that many; inference-perf's own output count
  re-tokenises the text and its inter-token latency counts stream events, two per token
  on these servers, so neither is used);
- `concurrency`: Little's law on the successes, achieved rate × mean E2E;
- `overloaded`: the server did not hold: it lost requests (client time-outs) or kept them
  waiting for their first token `OVERLOAD_TTFT_S` or more on average.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

__all__ = ["OVERLOAD_TTFT_S", "RealStage", "load_stages", "runs_dir"]

# A mean TTFT this long is a queue that grew for the whole stage (the real ones that held
# stayed under 0.2 s; the overloaded ones reached 100 s and more).
OVERLOAD_TTFT_S = 10.0

# Hugging Face names in the runs -> `plan` catalogue names.
_MODELS = {
    "meta-llama/Llama-2-7b-hf": "llama-2-7b",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b",
    "mistralai/Mixtral-8x7B-v0.1": "mixtral-8x7b",
    "codellama/CodeLlama-34b-Instruct-hf": "codellama-34b",
}


@dataclass(frozen=True, slots=True)
class RealStage:
    """One load stage of one real run: what was sent and what the client measured."""

    experiment: str  # the run's folder name without its time stamp
    model: str  # `plan` catalogue name
    tensor_parallel: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    stage: int
    rate: float  # requests per second asked
    duration_s: float
    groups: int
    prompts_per_group: int
    system_prompt_len: int
    question_len: int
    output_len: int  # max_tokens of every request (ignore_eos)
    prompt_len: float  # mean prompt tokens the server saw (inference-perf's count)
    achieved_rate: float
    num_ok: int
    num_failed: int
    ttft_s: float
    e2e_s: float

    @property
    def token_interval_s(self) -> float:
        return (self.e2e_s - self.ttft_s) / (self.output_len - 1)

    @property
    def concurrency(self) -> float:
        return self.achieved_rate * self.e2e_s

    @property
    def overloaded(self) -> bool:
        return self.num_failed > 0 or self.ttft_s >= OVERLOAD_TTFT_S

    @property
    def label(self) -> str:
        return f"{self.experiment} @{self.rate:g}/s"

    @property
    def workload(self) -> str:
        """The same traffic as an infertriage `--workload`: the cycled prompt set, each
        prompt as long as the server counted it (re-tokenised text runs longer than the
        ids inference-perf drew)."""
        question = max(1, round(self.prompt_len) - self.system_prompt_len)
        return (
            f"prefix:groups={self.groups},prompts={self.prompts_per_group},"
            f"prefix={self.system_prompt_len},input={question},output={self.output_len}"
        )

    def scenario(self, **frontend: float) -> dict[str, object]:
        """The served deployment as a twin scenario mapping (H100, BF16, the engine's limits);
        `frontend` settings, when given, override the twin's."""
        mapping: dict[str, object] = {
            "model": self.model,
            "dtype": "bf16",
            "gpu": "H100-SXM",
            "tensor_parallel": self.tensor_parallel,
            "engine": {
                "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": self.max_num_batched_tokens,
                "max_model_len": self.max_model_len,
            },
        }
        if frontend:
            mapping["frontend"] = frontend
        return mapping


def runs_dir() -> Path | None:
    """The runs' folder, or None when the shared fixtures are absent."""
    env = os.environ.get("INFERTRIAGE_FIXTURES")
    base = Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared/fixtures"
    path = base / "calibration" / "vllm-h100-inference-perf"
    return path if path.is_dir() else None


def _stage(folder: Path, index: int, load: dict[str, float], exp: dict, data: dict) -> RealStage:  # type: ignore[type-arg]
    metrics = json.loads(
        (folder / "results" / f"stage_{index}_lifecycle_metrics.json").read_text("utf-8")
    )
    ok = metrics["successes"]
    latency = ok["latency"]
    return RealStage(
        experiment=folder.name.split("-", 2)[2],
        model=_MODELS[exp["model"]],
        tensor_parallel=int(exp["tensor_parallelism"]),
        max_model_len=int(exp["max_model_len"]),
        max_num_batched_tokens=int(exp["max_num_batched_tokens"]),
        max_num_seqs=int(exp["max_num_seqs"]),
        stage=index,
        rate=float(load["rate"]),
        duration_s=float(load["duration"]),
        groups=int(data["num_groups"]),
        prompts_per_group=int(data["num_prompts_per_group"]),
        system_prompt_len=int(data["system_prompt_len"]),
        question_len=int(data["question_len"]),
        output_len=int(data["output_len"]),
        prompt_len=float(ok["prompt_len"]["mean"]),
        achieved_rate=float(metrics["load_summary"]["achieved_rate"]),
        num_ok=int(ok["count"]),
        num_failed=int(metrics.get("failures", {}).get("count", 0)),
        ttft_s=float(latency["time_to_first_token"]["mean"]),
        e2e_s=float(latency["request_latency"]["mean"]),
    )


def load_stages(path: Path | None = None) -> list[RealStage]:
    """Every stage of every run, in folder order; [] when the fixtures are absent."""
    root = runs_dir() if path is None else path
    if root is None:
        return []
    stages = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        exp = yaml.safe_load((folder / "exp-config.yaml").read_text("utf-8"))
        # results/config.yaml is what inference-perf resolved and ran (the profile's
        # multi-turn keys were not applied by that version).
        config = yaml.safe_load((folder / "results" / "config.yaml").read_text("utf-8"))
        data = config["data"]["shared_prefix"]
        for index, load in enumerate(config["load"]["stages"]):
            stages.append(_stage(folder, index, load, exp, data))
    return stages
