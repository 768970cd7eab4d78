"""`python -m hfrelease` is the `hfrelease` command."""

from hfrelease.cli import main

main()
