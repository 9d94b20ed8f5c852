"""cli, level 6: the thin typer app. Each command parses, calls one `api` function and renders.

`main()` is the console script: a `UserError` becomes one sentence on stderr
and exit code 2, never a traceback.
"""

from infertriage.cli.app import app, main

__all__ = ["app", "main"]
