"""loadgen, level 2: `BenchSpec`, the one model of a load test — what the user asked for.

Takes the command line's values (or a command's that runs a bench: diagnose, validate,
compare); gives `ClientSpec` (how requests reach the server and what is known of its
model), `BenchSpec` (the load levels, the workload — parsed once, a `WorkloadSpec` —, the
bounds and the load engine), `client_config` (the one `ClientConfig` a load sends with)
and `BenchSpec.run_config` (run.json's `config`). Each range is checked here, once, as the
spec is made (`schemas.CommandSpec`: one sentence naming the flag). `api.specs`
re-exports both models.

The API key and header values are sent, never stored: they are left out of every dump
(and of `repr`); a header that is not `NAME:VALUE`, or a key or header with a control
character (CR, LF), is refused when the spec is made. A server URL's `user:password@` is
taken off it as the spec is made and sent as an `Authorization: Basic` header of the
client's (`ClientSpec.headers`), so no stored or printed URL carries it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from infertriage.loadgen.maxrate import MaxRateRule
from infertriage.loadgen.request import ClientConfig, Endpoint
from infertriage.net import basic_authorization, check_header, split_userinfo
from infertriage.schemas import Thresholds, UserError
from infertriage.schemas.exports import Exports
from infertriage.schemas.spec import CommandSpec
from infertriage.workload import DEFAULT_WORKLOAD, WorkloadSpec, parse_workload

__all__ = [
    "BenchSpec",
    "ClientSpec",
    "Workload",
    "client_config",
    "default_workload",
    "known_standard",
    "mlperf_model_needs_standard",
    "userinfo_to_header",
]

_STALL_CAP_S = 60.0  # --stall-timeout not given: min(--timeout, this)
_DRAIN_CAP_S = 30.0  # --drain-timeout not given: min(--timeout, this)
_CONNECT_CAP_S = 10.0


def _parsed(value: object) -> object:
    return parse_workload(value) if isinstance(value, str) else value


# `--workload`: parsed once as the spec is made; dumped as the text it was given
Workload = Annotated[
    WorkloadSpec,
    BeforeValidator(_parsed),
    PlainSerializer(lambda spec: spec.text, return_type=str),
]


def default_workload() -> WorkloadSpec:
    """The chat mix, when no `--workload` is given."""
    return parse_workload(DEFAULT_WORKLOAD)


class ClientSpec(CommandSpec):
    """How requests reach the server and what is known of its model (bench's, and the
    loads of diagnose, validate and compare)."""

    model: str | None = None  # None: the server's first
    endpoint: Endpoint = Endpoint.CHAT
    api_key: str | None = Field(default=None, exclude=True, repr=False)  # sent, never stored
    headers: tuple[str, ...] = Field(  # NAME:VALUE, sent
        default=(), exclude=True, repr=False, json_schema_extra={"flag": "--header"}
    )
    tokenizer: Path | None = None  # a local tokenizer.json
    max_model_len: int | None = Field(default=None, ge=1)  # where the server does not say it

    @field_validator("api_key")
    @classmethod
    def _sendable_key(cls, value: str | None) -> str | None:
        if value:
            check_header("--api-key", "", value)
        return value

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for header in value:
            name, sep, sent = header.partition(":")
            if not sep or not name.strip():  # quoted by no sentence: it may be a secret
                raise UserError("a --header is not NAME:VALUE (e.g. --header 'X-Api-Key: …').")
            check_header("--header", name.strip(), sent)
        return value

    def header_pairs(self) -> tuple[tuple[str, str], ...]:
        """`headers` as (NAME, VALUE) pairs, each stripped."""
        split = (header.partition(":") for header in self.headers)
        return tuple((name.strip(), value.strip()) for name, _, value in split)

    def sets_authorization(self) -> bool:
        """The key, or a `--header Authorization:…`, sets the request's `Authorization`."""
        names = (header.partition(":")[0].strip().lower() for header in self.headers)
        return bool(self.api_key) or "authorization" in names


STANDARDS = ("mlperf",)  # `--standard`: `loadgen.standards` runs and judges each


def mlperf_model_needs_standard(standard: str | None, mlperf_model: str | None) -> None:
    """`--mlperf-model` without `--standard mlperf` would be ignored: one sentence instead."""
    if mlperf_model is not None and standard is None:
        raise UserError(
            f"--mlperf-model {mlperf_model!r} names the limits --standard mlperf judges by: "
            "add --standard mlperf."
        )


def known_standard(value: str | None) -> str | None:
    """`--standard`, lower-cased; one not in `STANDARDS` is refused."""
    if value is None:
        return None
    if value.lower() not in STANDARDS:
        raise UserError(f"--standard {value!r}: give one of {', '.join(STANDARDS)}.")
    return value.lower()


def userinfo_to_header(data: Any) -> Any:
    """A spec's `url` (or compare's `urls`) with `user:password@`: the URL without it, and
    `Authorization: Basic` for it among the client's headers (see the module docstring)."""
    if not isinstance(data, dict):
        return data
    key = "urls" if "urls" in data else "url"
    given = data.get(key)
    urls = list(given) if key == "urls" and isinstance(given, list | tuple) else [given]
    split = [split_userinfo(url) if isinstance(url, str) else (url, None) for url in urls]
    userinfos = {userinfo for _, userinfo in split}
    if userinfos == {None}:
        return data
    if len(userinfos) > 1:
        raise UserError(
            "the two --url carry different user:password@ credentials, and compare sends one "
            "set to both servers: give both URLs the same."
        )
    userinfo = userinfos.pop()
    assert userinfo is not None
    client = data.get("client", ClientSpec())
    if isinstance(client, dict):
        client = ClientSpec.model_validate(client)
    if not isinstance(client, ClientSpec):
        return data  # pydantic names the problem
    if client.sets_authorization():
        raise UserError(
            "--url carries user:password@, which is sent as the Authorization header, and "
            "--api-key (or OPENAI_API_KEY, or an Authorization --header) sets it too: "
            "give one of them."
        )
    header = f"Authorization: {basic_authorization(userinfo)}"
    stripped = [url for url, _ in split]
    return {
        **data,
        key: tuple(stripped) if key == "urls" else stripped[0],
        "client": client.model_copy(update={"headers": (*client.headers, header)}),
    }


class BenchSpec(CommandSpec):
    """`bench`: load levels against one server; `labels` go on every record (validate's
    phase, compare's arm). `run_bench` resolves `url` (normalised) and `client.model`
    (the server's first, where none was asked)."""

    url: str
    client: ClientSpec = ClientSpec()
    rates: tuple[Annotated[float, Field(allow_inf_nan=True)], ...] = Field(  # inf: all at once
        default=(), json_schema_extra={"flag": "--rate"}
    )
    concurrencies: tuple[Annotated[int, Field(ge=1)], ...] = Field(
        default=(), json_schema_extra={"flag": "--concurrency"}
    )
    sweep: bool = False
    # the goodput search (`loadgen.maxrate`): the largest Poisson rate whose SLOs hold
    find_max_rate: bool = False
    max_rate_rule: MaxRateRule = MaxRateRule.ATTAINMENT
    attainment: float = Field(default=0.9, gt=0, lt=1)  # the share of requests meeting every SLO
    rate_tolerance: float = Field(default=0.05, gt=0, lt=1)  # the bracket's width, relative
    workload: Workload = Field(default_factory=default_workload)
    arrival: str = "poisson"
    duration_s: float | None = Field(default=None, gt=0)
    num_requests: int | None = Field(default=None, ge=1)
    workers: int = Field(default=1, ge=1, le=256)
    locust_workers: int | None = Field(default=None, ge=1, le=1024)  # a Locust master, N workers
    locust_master_host: str | None = None  # HOST[:PORT]: remote workers join it
    max_concurrency: int | None = Field(default=None, ge=1)
    think_time_s: float = Field(default=0.0, ge=0)
    out: Path | None = None
    force: bool = False
    thresholds: Thresholds | None = None  # None: the defaults (`--slo` loaded by the caller)
    goodput: str | None = None
    timeout_s: float = Field(default=600.0, gt=0)
    stall_timeout_s: float | None = Field(default=None, gt=0)  # None: min(timeout, 60 s)
    drain_timeout_s: float | None = Field(default=None, ge=0)  # None: min(timeout, 30 s)
    # None: wait for every stream (`runner.drain_settled`)
    drain_settle_share: float | None = Field(default=None, gt=0, le=1)
    seed: int = Field(default=0, ge=0)
    continuous_usage: bool = True
    ignore_eos: bool = True  # send ignore_eos and min_tokens = max_tokens (exact lengths)
    # count a sample of prompts with the server's /tokenize
    check_tokens: bool = Field(default=True, json_schema_extra={"flag": "--tokenize-check"})
    use_uvloop: bool = Field(default=True, json_schema_extra={"flag": "--uvloop"})
    # an open-loop rate level stops issuing once over-saturated (`loadgen.saturation`)
    stop_on_saturation: bool = True
    labels: tuple[tuple[str, str], ...] = ()
    # `--standard mlperf`: LoadGen's Server scenario for `--mlperf-model` (`loadgen.standards`)
    standard: str | None = None
    mlperf_model: str | None = None
    # `--export vllm,aiperf`: the run also in those tools' formats (`api.exports`)
    exports: Exports = Field(default=(), json_schema_extra={"flag": "--export"})

    @model_validator(mode="before")
    @classmethod
    def _credentials(cls, data: Any) -> Any:
        return userinfo_to_header(data)

    @field_validator("standard")
    @classmethod
    def _known_standard(cls, value: str | None) -> str | None:
        return known_standard(value)

    @field_validator("max_rate_rule", mode="before")
    @classmethod
    def _known_rule(cls, value: object) -> object:
        known = [rule.value for rule in MaxRateRule]
        if isinstance(value, str) and value not in known:
            raise UserError(f"--max-rate-rule {value!r}: give {' or '.join(known)}.")
        return value

    @model_validator(mode="after")
    def _flags_that_apply(self) -> BenchSpec:
        """A search setting without `--find-max-rate`, or `--mlperf-model` without
        `--standard`, would be ignored in silence: refused in one sentence instead."""
        mlperf_model_needs_standard(self.standard, self.mlperf_model)
        given = [
            flag
            for flag, value, default in (
                ("--max-rate-rule", self.max_rate_rule, MaxRateRule.ATTAINMENT),
                ("--attainment", self.attainment, 0.9),
                ("--rate-tolerance", self.rate_tolerance, 0.05),
            )
            if value != default
        ]
        if given and not self.find_max_rate:
            verb = "is" if len(given) == 1 else "are"
            raise UserError(
                f"{', '.join(given)} {verb} for the goodput search: add --find-max-rate."
            )
        return self

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        for rate in value:
            if not rate > 0:  # nan too
                raise UserError(f"--rate values must be positive, not {rate:g}.")
        return value

    @property
    def stall_s(self) -> float:
        """No byte for this long fails a request."""
        return self.stall_timeout_s or min(self.timeout_s, _STALL_CAP_S)

    @property
    def probe_s(self) -> float:
        """The most a pre-flight probe of the server waits: a request's time-out or its stall
        time-out, whichever is shorter."""
        return min(self.timeout_s, self.stall_s)

    @property
    def drain_s(self) -> float:
        """How long to wait for the streams in flight once the level stops issuing."""
        cap = min(self.timeout_s, _DRAIN_CAP_S)
        return cap if self.drain_timeout_s is None else self.drain_timeout_s

    def run_config(self) -> dict[str, object]:
        """run.json's `config`: the keys every reader of a bench run knows (never a secret)."""
        client = self.client
        return {
            "url": self.url,
            "model": client.model or "",
            "endpoint": client.endpoint.value,
            "rates": list(self.rates),
            "concurrencies": list(self.concurrencies),
            "sweep": self.sweep,
            "workload": self.workload.text,
            "arrival": self.arrival,
            "duration_s": self.duration_s,
            "num_requests": self.num_requests,
            "workers": self.workers,
            "locust_workers": self.locust_workers,
            "locust_master_host": self.locust_master_host,
            "max_concurrency": self.max_concurrency,
            "think_time_s": self.think_time_s,
            "timeout_s": self.timeout_s,
            "stall_timeout_s": self.stall_s,
            "drain_timeout_s": self.drain_s,
            "drain_settle_share": self.drain_settle_share,
            "goodput": self.goodput,
            "seed": self.seed,
            "tokenizer": None if client.tokenizer is None else str(client.tokenizer),
            "max_model_len": client.max_model_len,
            "continuous_usage": self.continuous_usage,
            "ignore_eos": self.ignore_eos,
            "check_tokens": self.check_tokens,
            "header_names": [name for name, _ in client.header_pairs()],
            "use_uvloop": self.use_uvloop,
        }


def client_config(spec: BenchSpec, *, keep_text: bool) -> ClientConfig:
    """The one `ClientConfig` a bench's requests are sent with (key and headers included)."""
    return ClientConfig(
        base_url=spec.url,
        model=spec.client.model or "",
        endpoint=spec.client.endpoint,
        api_key=spec.client.api_key,
        headers=spec.client.header_pairs(),
        timeout_s=spec.timeout_s,
        stall_timeout_s=spec.stall_s,
        connect_timeout_s=min(_CONNECT_CAP_S, spec.timeout_s),
        continuous_usage=spec.continuous_usage,
        send_ignore_eos=spec.ignore_eos,
        keep_text=keep_text,
    )
