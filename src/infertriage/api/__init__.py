"""api, level 5: one programmatic entry point per command.

Each function takes plain, typed arguments, does the whole job of one
command and returns a typed result; the CLI only parses and renders. Errors
the user can fix are `UserError`s. One module per command.
"""

from infertriage.api.plan import plan, summarize_run_workload
from infertriage.api.twin import serve_twin

__all__ = ["plan", "serve_twin", "summarize_run_workload"]
