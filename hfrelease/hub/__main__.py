"""`python -m hfrelease.hub --root DIR`: the Hub server without the hfrelease CLI (standard library only)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from hfrelease.hub.server import ServeSettings, run


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hfrelease.hub", description=__doc__)
    parser.add_argument("--root", type=Path, required=True, help="directory holding the server's state")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--token", action="append", default=[], help="a token allowed to write (repeatable)")
    parser.add_argument("--fault-injection", action="store_true", help="test-only: enable /api/_hfrelease/faults")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    run(ServeSettings(root=args.root, host=args.host, port=args.port, tokens=tuple(args.token),
                      fault_injection=args.fault_injection))  # fmt: skip


if __name__ == "__main__":
    main()
