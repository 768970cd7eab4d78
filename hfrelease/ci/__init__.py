"""Releasing from CI: the release workflow's files, what a job writes for GitHub Actions, and the rehearsal of
the workflow on one machine.

`workflows` renders the family's GitHub Actions workflows, `install` checks and picks the line they install
hfrelease with, `scaffold` writes a new family (`hfrelease init`), `github` what a job writes for GitHub Actions
(folds, step summaries, outputs), `trusted_hub` the built-in Hub's trusted publishers for a rehearsal, and
`rehearsal` runs the release workflow file job by job on this machine (through `hfrelease.ci.actions`). What a
release decides (the tag, the eval matrix, the gate decision over the merged ledger) is
`hfrelease.publish.decision`'s; the release downloaded back and checked is `hfrelease.publish.readback`'s.
"""
