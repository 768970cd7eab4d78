"""Where what lm-eval writes goes while hfrelease runs it: its log and the terminal output it would scribble
under a live view both go to the run directory's `lm-eval.log`."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def stderr_to(log_path: Path) -> Iterator[None]:
    """Send file descriptor 2 to `log_path` for the duration: lm-eval's progress bars and the `git`
    it runs for provenance write straight to the terminal, under any live view; they belong in the log."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def route_lm_eval_logs(log_path: Path) -> None:
    # lm-eval logs every request warning to the console; in a live view that is noise. Its log goes to
    # the run directory instead, where it is kept with the server logs.
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    # asyncio's own logger too: lm-eval's request tasks are its only tasks here, and what asyncio says about
    # them ("Task exception was never retrieved") belongs beside lm-eval's log of the same requests.
    for name in ("lm_eval", "lm-eval", "lm_eval.evaluator", "httpx", "asyncio"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
