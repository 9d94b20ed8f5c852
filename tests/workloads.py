"""Workloads the end-to-end tests share.

`SHORT_OUTPUTS` is the default chat mix (its prompts and shared prefix) with outputs of 16
to 128 tokens, for tests of what `diagnose` or `validate` captures, renders, reads or
finds beside the load rather than of the default mix itself: the default's log-normal
outputs (p90 1,024 tokens, a tail past 2,000) keep a short level's drain waiting up to
~25 s for its last streams. tests/api/test_diagnose.py judges every scenario under the
default mix, and tests/api/test_validate.py's default load is the default mix too.
"""

from __future__ import annotations

SHORT_OUTPUTS = "chat-mix:output=uniform(16,128)"
