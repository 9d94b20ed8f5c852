"""diagnose, level 3: rules over signals, ranked into the seven-layer bottleneck map.

Takes `Evidence` (signals by name) and `Thresholds`; gives a `Diagnosis`.
Pure: no I/O, no clock. Every rule is registered in `registry.RULES`.
"""

from infertriage.diagnose.evidence import SIGNALS, Evidence, SignalDef
from infertriage.diagnose.rank import CAUSES, diagnose_evidence, run_rules, trace_findings
from infertriage.diagnose.registry import RULES, Rule

__all__ = [
    "CAUSES",
    "RULES",
    "SIGNALS",
    "Evidence",
    "Rule",
    "SignalDef",
    "diagnose_evidence",
    "run_rules",
    "trace_findings",
]
