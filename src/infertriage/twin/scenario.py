"""twin, level 2: scenario files, loaded and checked, and the packaged ones.

Takes a packaged scenario name (`kv-pressure`) or a path to a YAML file; gives a
validated `Scenario` (schema in `twin.scenario_model`). Every problem is a
`UserError` of one sentence naming the file and the key: an unknown key, a wrong
type or range, an unknown model, GPU or dtype, or a server that could not start
(no room for the KV cache, or not enough for one `max_model_len` request, as vLLM
refuses to start).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from infertriage.plan import get_gpu, normalize_dtype
from infertriage.schemas import UserError
from infertriage.schemas.inputs import (
    MAX_SENTENCE_CHARS,
    clip,
    load_yaml,
    quoted,
    read_small_text,
    why_missing,
)
from infertriage.twin.capacity import make_hardware
from infertriage.twin.models import resolve_model
from infertriage.twin.scenario_model import (
    EngineSettings,
    FaultSettings,
    FrontendSettings,
    Scenario,
    SpeculativeSettings,
)

__all__ = ["list_scenarios", "load_scenario", "scenario_from_mapping"]

_PACKAGE = "infertriage.twin"
_SECTIONS: Mapping[str, type[BaseModel]] = {
    "engine": EngineSettings,
    "speculative": SpeculativeSettings,
    "frontend": FrontendSettings,
    "faults": FaultSettings,
}


def list_scenarios() -> list[str]:
    """The packaged scenario names, sorted."""
    folder = resources.files(_PACKAGE).joinpath("scenarios")
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_scenario(name_or_path: str) -> Scenario:
    """A packaged scenario by name, or a YAML file by path; `UserError` on any problem."""
    if name_or_path in list_scenarios():
        entry = resources.files(_PACKAGE).joinpath("scenarios", f"{name_or_path}.yaml")
        return _parse(entry.read_text("utf-8"), f"{name_or_path}.yaml", None)
    path = Path(name_or_path).expanduser()
    if not path.exists() and path.is_symlink():  # a link that leads nowhere: why
        raise UserError(f"scenario {path} {why_missing(path)}.")
    if not path.exists():
        raise UserError(
            f"unknown scenario {quoted(name_or_path)}: not a packaged one "
            f"({', '.join(list_scenarios())}) nor a YAML file on disk."
        )
    text = read_small_text(path, f"scenario file {path}")
    return _parse(text, str(path), str(path.resolve().parent))


def scenario_from_mapping(
    data: Mapping[str, object], source: str = "<mapping>", base_dir: str | None = None
) -> Scenario:
    """Validate an already-parsed scenario; `source` names it in error sentences."""
    try:
        scenario = Scenario.model_validate(dict(data))
    except ValidationError as err:
        raise UserError(_sentence(source, err.errors()[0])) from err
    scenario._source = source
    scenario._base_dir = base_dir
    _check_resolves(scenario)
    return scenario


def _parse(text: str, source: str, base_dir: str | None) -> Scenario:
    data = load_yaml(text, f"scenario {source}")
    if data is None:  # an empty file, or only comments: a mistake more often than "defaults"
        raise UserError(
            f"scenario {source} is empty: give at least one key, or {{}} for the healthy defaults."
        )
    if not isinstance(data, dict):
        raise UserError(
            f"scenario {source} must be a mapping of keys, not a {type(data).__name__}."
        )
    return scenario_from_mapping(data, source, base_dir)


def _dotted(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _known_keys(loc: tuple[int | str, ...]) -> str:
    model: type[BaseModel] = Scenario
    if len(loc) > 1 and str(loc[0]) in _SECTIONS:
        model = _SECTIONS[str(loc[0])]
    return ", ".join(model.model_fields)


def _sentence(source: str, error: ErrorDetails) -> str:
    """pydantic's first error as one sentence naming the file and the dotted key."""
    loc = tuple(error["loc"])
    key = _dotted(loc)
    if error["type"] == "extra_forbidden":
        known = _known_keys(loc)
        return f"scenario {source} has an unknown key {quoted(key)}; known keys there: {known}."
    message = error["msg"]
    message = message[:1].lower() + message[1:]
    given = error.get("input")
    shown = "" if isinstance(given, dict) else f", not {quoted(given)}"
    return f"scenario {source}, key {quoted(key)}: {message}{shown}."


def _check_resolves(scenario: Scenario) -> None:
    """The model, GPU and dtype must be known, and the server must be able to start."""
    source = scenario.source
    base_dir = Path(scenario.base_dir) if scenario.base_dir is not None else None
    checks: tuple[tuple[str, Callable[[], object]], ...] = (
        ("model", lambda: resolve_model(scenario.model, base_dir)),
        ("gpu", lambda: get_gpu(scenario.gpu)),
        ("dtype", lambda: normalize_dtype(scenario.dtype)),
        ("tensor_parallel", lambda: make_hardware(scenario)),
    )
    for key, check in checks:
        try:
            check()
        except UserError as err:
            raise UserError(
                f"scenario {source}, key {key!r}: {clip(err.message, MAX_SENTENCE_CHARS)}"
            ) from err
    hardware = make_hardware(scenario)
    engine = scenario.engine
    blocks_per_request = -(-engine.max_model_len // engine.block_size)
    if hardware.num_usable_blocks < blocks_per_request:
        key = "engine.gpu_memory_utilization"
        if engine.num_gpu_blocks_override is not None:
            key = "engine.num_gpu_blocks_override"
        raise UserError(
            f"scenario {source}, key {key!r}: the KV cache holds "
            f"{hardware.num_usable_blocks * engine.block_size} tokens, fewer than one "
            f"max_model_len ({engine.max_model_len}) request needs, so vLLM would not start."
        )
    if not engine.enable_chunked_prefill and engine.max_num_batched_tokens < engine.max_model_len:
        raise UserError(
            f"scenario {source}, key 'engine.max_num_batched_tokens': without chunked prefill it "
            f"must be at least max_model_len ({engine.max_model_len}), as vLLM requires."
        )
