"""A GitHub Actions workflow run on one machine: the rehearsal of a release executes its workflow file.

    workflow.py    the file read into jobs and steps
    expression.py  `${{ }}` expressions
    matrix.py      `strategy.matrix` combinations
    artifact.py    upload-artifact / download-artifact, the only state passed between jobs
    substitute.py  what stands in for checkout, setup-python and pip installs
    runner.py      the job graph: needs, if:, matrix, fail-fast, steps as subprocesses
    run.py         a run as data: its settings, its events, how each step and job ended
"""
