"""twin.scenario: packaged files, defaults, and one-sentence errors naming the file and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infertriage.schemas import UserError
from infertriage.twin.capacity import make_hardware
from infertriage.twin.models import TWIN_MODEL_PRESETS
from infertriage.twin.scenario import list_scenarios, load_scenario, scenario_from_mapping
from infertriage.twin.scenario_model import Scenario

PACKAGED = {
    "healthy",
    "kv-pressure",
    "kv-leak",
    "queue-bound",
    "launch-bound",
    "bandwidth-bound",
    "tp-over-pcie",
    "spec-low-acceptance",
    "frontend-bound",
    "dp-imbalance",
    "dp-prefix-blind",
    "healthy-dp",
    "pd-slow-link",
    "pd-ratio",
    "healthy-pd",
    "offload-thrash",
    "offload-helps",
    # expert and pipeline parallelism
    "ep-hot-experts",
    "healthy-ep",
    "pp-bubbles",
    "healthy-pp",
}


def write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_packaged_scenario_loads_and_describes_itself() -> None:
    assert set(list_scenarios()) == PACKAGED
    for name in PACKAGED:
        scenario = load_scenario(name)
        assert scenario.source == f"{name}.yaml"
        assert len(scenario.description) > 40


def test_the_healthy_file_is_the_defaults() -> None:
    healthy = load_scenario("healthy").model_dump(exclude={"description"})
    assert healthy == Scenario().model_dump(exclude={"description"})
    engine = Scenario().engine
    assert (engine.max_num_seqs, engine.max_num_batched_tokens, engine.block_size) == (
        256,
        8192,
        16,
    )


def test_healthy_kv_cache_matches_vllm_scale() -> None:
    hardware = make_hardware(Scenario())
    # Llama-3.1-8B on an H100 at 0.9: ~15 GiB of weights, ~55 GiB of KV, ~28k blocks of 16.
    assert 26_000 < hardware.num_gpu_blocks < 30_000
    assert hardware.num_usable_blocks == hardware.num_gpu_blocks - 1


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("engine: {max_num_seqs: lots}\n", ["mine.yaml", "'engine.max_num_seqs'", "integer"]),
        ("engine: {max_num_sqs: 8}\n", ["mine.yaml", "unknown key 'engine.max_num_sqs'"]),
        ("colour: red\n", ["mine.yaml", "unknown key 'colour'", "description"]),
        ("engine: {enable_prefix_caching: 'yes'}\n", ["'engine.enable_prefix_caching'", "boolean"]),
        ("gpu: H1000\n", ["mine.yaml", "key 'gpu'", "unknown GPU 'H1000'"]),
        ("model: llama-9b\n", ["mine.yaml", "key 'model'", "'llama-9b'", "qwen2.5-0.5b"]),
        ("dtype: fp7\n", ["key 'dtype'", "fp7"]),
        ("interconnect: infiniband\n", ["key 'interconnect'", "'nvlink' or 'pcie'"]),
        ("tensor_parallel: 0\n", ["key 'tensor_parallel'", "greater than or equal to 1"]),
        ("engine: {gpu_memory_utilization: 0.15}\n", ["gpu_memory_utilization", "would not start"]),
        ("- a\n- b\n", ["mine.yaml", "mapping"]),
        ("engine: [\n", ["mine.yaml", "not valid YAML"]),
    ],
)
def test_bad_scenarios_are_one_sentence_user_errors(
    tmp_path: Path, text: str, pieces: list[str]
) -> None:
    with pytest.raises(UserError) as caught:
        load_scenario(str(write(tmp_path, text)))
    message = str(caught.value)
    for piece in pieces:
        assert piece in message, message
    assert message.count("\n") == 0 and message.endswith(".")


def test_an_unknown_name_lists_the_packaged_ones() -> None:
    with pytest.raises(UserError, match="healthy"):
        load_scenario("no-such-scenario")


def test_an_empty_mapping_is_the_healthy_server(tmp_path: Path) -> None:
    scenario = load_scenario(str(write(tmp_path, "{}\n")))
    assert scenario.model == "llama-3.1-8b" and scenario.source.endswith("mine.yaml")


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_an_empty_file_is_an_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(UserError, match=r"mine\.yaml is empty"):
        load_scenario(str(write(tmp_path, text)))


def test_a_model_path_is_read_relative_to_the_scenario(tmp_path: Path) -> None:
    config = dict(TWIN_MODEL_PRESETS["qwen2.5-0.5b"])
    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    scenario = load_scenario(str(write(tmp_path, "model: small/config.json\n")))
    assert make_hardware(scenario).spec.hidden_size == 896


def test_the_block_count_can_be_forced_but_must_fit_one_request() -> None:
    scenario = scenario_from_mapping({"engine": {"num_gpu_blocks_override": 600}}, "forced")
    assert make_hardware(scenario).num_gpu_blocks == 600
    with pytest.raises(UserError, match=r"'engine\.num_gpu_blocks_override'.*would not start"):
        scenario_from_mapping({"engine": {"num_gpu_blocks_override": 100}}, "forced")


def test_mappings_validate_like_files() -> None:
    scenario = scenario_from_mapping({"engine": {"max_num_seqs": 8}}, "inline")
    assert scenario.engine.max_num_seqs == 8 and scenario.source == "inline"
    with pytest.raises(UserError, match="scenario inline, key 'seed'"):
        scenario_from_mapping({"seed": 1.5}, "inline")
