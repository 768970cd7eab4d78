"""Imported only by the forkserver of the gate processes (`gate_process.PRELOAD`), never by hfrelease itself:
what every gate needs and may share, done once before any gate is forked. Importing it builds lm-eval's
index of its own tasks (`task_index`), which every gate's task manager then reuses instead of rebuilding."""

from hfrelease.evaluation import task_index

task_index.warm()
