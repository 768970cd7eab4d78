"""One function per pipeline stage, below the CLI: a frozen settings object in, a typed report out.

Each report's `as_dict()` is the command's `--json` document and its `exit_code` the command's exit
status (`exit_status`). The CLI parses options into settings, calls the stage, renders the report; the
release rehearsal runs the same commands, so every caller runs the same code, with the same clean-up
on SIGTERM (`runner.stage_signals`).

- `check`: every manifest validated, then preflighted or its cards linted (`check_stage`)
- `eval`: gates and speed anchors (`run_eval_stage`, `plan_eval_stage` for --dry-run)
- `cards`: render and lint (`render_stage`, `lint_stage`)
- `publish`: `bundle_stage`, `publish_stage`, `verify_stage`
- `release`: the command's options checked together (`ReleaseSettings`), the rehearsal of the whole workflow
  (`rehearse_stage`, over `hfrelease.ci.rehearsal.rehearse`) and its own steps (`check_step`,
  `gate_step`, `publish_step`)
- `init`: a new family scaffolded, with the repository's set-up steps (`init_stage`)
- `runner`: what they share (exit policy, SIGTERM, an error's message and exit code: `failure_of`; the cache
  directory and the default hash cache are `hfrelease.files.cache`'s)
- `view`: a report's view for people as data (lines and tables of styled text) that the CLI draws; each
  command's in `eval_view`, `publish_view` (bundle, publish, verify; the release's live progress), `compare_view`,
  `ledger_view` (`ledger merge`), `release_view`, `cards` (`render_view`) and `check` (`manifest_view`)
"""
