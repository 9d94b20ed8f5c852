"""schemas, level 0: the contracts between stages.

Types (`RequestRecord`, `Sample`, `Signal`, `Finding`, `Diagnosis`), the
seven `Layer`s and five `Status`es, `Thresholds`, units and the run's time
base, the normalised metric vocabulary, run-directory IO and the one
user-error type. Imports nothing else from infertriage.
"""

from infertriage.schemas.baselines import BaselineStore, SavedBaseline, default_store_root
from infertriage.schemas.checks import Check, CheckGroup, CheckStatus, checklist_ready
from infertriage.schemas.diagnosis import (
    DIAGNOSIS_SCHEMA,
    ChainLink,
    Diagnosis,
    EvidenceItem,
    Finding,
    JudgedWindow,
    LayerResult,
    LoggedRequest,
    Primary,
    SloResult,
    Unexplained,
)
from infertriage.schemas.errors import EXIT_INTERRUPTED, EXIT_USER_ERROR, Interrupted, UserError
from infertriage.schemas.frozen import FrozenModel
from infertriage.schemas.layers import LAYER_ORDER, Layer, Status
from infertriage.schemas.records import (
    Chunk,
    ErrorKind,
    RequestRecord,
    Sample,
    Signal,
    TokenSource,
    http_error_kind,
)
from infertriage.schemas.rundir import (
    RUN_SCHEMA,
    JsonlWriter,
    RunDir,
    RunInfo,
    check_out,
    read_json,
    read_jsonl,
    write_json,
)
from infertriage.schemas.thresholds import SloProfile, Thresholds, load_thresholds
from infertriage.schemas.units import (
    GB,
    GIB,
    MIB,
    RunClock,
    format_bytes,
    format_seconds,
    parse_bytes,
    parse_duration,
    parse_fraction,
)
from infertriage.schemas.vocabulary import VOCABULARY, MetricDef, MetricKind, get_metric

__all__ = [
    "DIAGNOSIS_SCHEMA",
    "EXIT_INTERRUPTED",
    "EXIT_USER_ERROR",
    "GB",
    "GIB",
    "LAYER_ORDER",
    "MIB",
    "RUN_SCHEMA",
    "VOCABULARY",
    "BaselineStore",
    "ChainLink",
    "Check",
    "CheckGroup",
    "CheckStatus",
    "Chunk",
    "Diagnosis",
    "ErrorKind",
    "EvidenceItem",
    "Finding",
    "FrozenModel",
    "Interrupted",
    "JsonlWriter",
    "JudgedWindow",
    "Layer",
    "LayerResult",
    "LoggedRequest",
    "MetricDef",
    "MetricKind",
    "Primary",
    "RequestRecord",
    "RunClock",
    "RunDir",
    "RunInfo",
    "Sample",
    "SavedBaseline",
    "Signal",
    "SloProfile",
    "SloResult",
    "Status",
    "Thresholds",
    "TokenSource",
    "Unexplained",
    "UserError",
    "check_out",
    "checklist_ready",
    "default_store_root",
    "format_bytes",
    "format_seconds",
    "get_metric",
    "http_error_kind",
    "load_thresholds",
    "parse_bytes",
    "parse_duration",
    "parse_fraction",
    "read_json",
    "read_jsonl",
    "write_json",
]
