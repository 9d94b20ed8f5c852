"""`python -m infertriage` runs the CLI."""

from infertriage.cli import main

main()
