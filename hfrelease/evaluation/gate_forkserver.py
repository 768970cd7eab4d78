"""Imported only by the forkserver of the gate processes (`gate_process.PRELOAD`), never by hfrelease itself:
what every gate needs and may share, done once before any gate is forked. Importing it builds lm-eval's
index of its own tasks (`task_index`), which every gate's task manager then reuses instead of rebuilding.

First, it removes the credentials the forkserver inherited from hfrelease's environment. A gate is forked
from it, so it starts with a copy of its memory: its `os.environ` (which the gate replaces with the environment
it is handed) and its initial environment block, what `/proc/<pid>/environ` shows. Every variable that the
gate's environment leaves out or redacts (`holding_secrets`) is cleared from the C environment and that block
(`seal_environment`), and leaves `os.environ` too: no gate needs them."""

import os

from hfrelease.redact import holding_secrets, seal_environment

for _name in seal_environment(names=holding_secrets()):
    os.environ.pop(_name, None)

from hfrelease.evaluation import task_index  # noqa: E402 (imported once the secrets are gone)

task_index.warm()
