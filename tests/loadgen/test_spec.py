"""`BenchSpec`: the one model of a load test, and run.json's `config` written from it.

Old run directories and every reader of a bench run (report, compare, diagnose
--from-run) read `config` by these keys; the spec writes exactly them, never a
secret, with the timeouts resolved; `client_config` is the one place the client's
runtime config is built from it.
"""

from __future__ import annotations

from pathlib import Path

from infertriage.loadgen.request import Endpoint
from infertriage.loadgen.spec import BenchSpec, ClientSpec, client_config

CONFIG_KEYS = [
    "url",
    "model",
    "endpoint",
    "rates",
    "concurrencies",
    "sweep",
    "workload",
    "arrival",
    "duration_s",
    "num_requests",
    "workers",
    "locust_workers",
    "locust_master_host",
    "max_concurrency",
    "think_time_s",
    "timeout_s",
    "stall_timeout_s",
    "drain_timeout_s",
    "drain_settle_share",
    "goodput",
    "seed",
    "tokenizer",
    "max_model_len",
    "continuous_usage",
    "ignore_eos",
    "check_tokens",
    "header_names",
    "use_uvloop",
]


def _spec(**fields: object) -> BenchSpec:
    client = ClientSpec(
        model="m",
        endpoint=Endpoint.COMPLETIONS,
        api_key="sk-secret",
        headers=("X-Team: secret-team",),
        tokenizer=Path("tok.json"),
        max_model_len=4096,
    )
    return BenchSpec.model_validate({"url": "http://h/v1", "client": client, **fields})


def test_run_config_keeps_every_key_readers_know_and_no_secret() -> None:
    config = _spec(timeout_s=20.0, workload="synthetic:input=8,output=4").run_config()
    assert list(config) == CONFIG_KEYS
    assert "secret" not in repr(config)
    assert config["header_names"] == ["X-Team"]
    assert config["workload"] == "synthetic:input=8,output=4"
    assert config["endpoint"] == "completions" and config["tokenizer"] == "tok.json"
    assert (config["stall_timeout_s"], config["drain_timeout_s"]) == (20.0, 20.0)  # min(timeout, …)


def test_the_timeouts_resolve_from_the_request_timeout_unless_given() -> None:
    assert (_spec().stall_s, _spec().drain_s) == (60.0, 30.0)
    given = _spec(stall_timeout_s=5.0, drain_timeout_s=0.0)
    assert (given.stall_s, given.drain_s) == (5.0, 0.0)


def test_the_client_config_is_made_from_the_spec_in_one_place() -> None:
    config = client_config(_spec(timeout_s=5.0, ignore_eos=False), keep_text=True)
    assert (config.base_url, config.model, config.endpoint) == (
        "http://h/v1",
        "m",
        Endpoint.COMPLETIONS,
    )
    assert config.api_key == "sk-secret" and config.headers == (("X-Team", "secret-team"),)
    assert (config.timeout_s, config.stall_timeout_s, config.connect_timeout_s) == (5.0, 5.0, 5.0)
    assert not config.send_ignore_eos and config.keep_text
