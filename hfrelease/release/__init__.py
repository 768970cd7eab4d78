"""Releasing from CI: what the release workflow decides and runs, and the rehearsal of it on one machine.

`workflows` renders the family's GitHub Actions workflows, `policy` holds the release's rules (the tag,
the eval matrix, the gate decision over the merged ledger), `ci` what a job writes for GitHub Actions
(folds, step summaries, outputs), `verification` the release downloaded back and checked, and
`rehearsal` runs the release workflow file job by job on this machine (through `hfrelease.actions`).
"""
