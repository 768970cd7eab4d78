"""The pipeline stages whose commands exist before their implementation lands.

Each parses its real options (so scripts and CI can be written against them now) and then says plainly
which issue builds it, with exit code 8 (`hfrelease.errors.NotBuiltError`). None is pending at the
moment: `release` landed with the GitHub Actions issue (`hfrelease.cli.release`).
"""
