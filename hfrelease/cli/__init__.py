"""The `hfrelease` command: a Click group that only registers commands and turns errors into exit codes.

Only this package imports Click and Rich. Each command module parses options and hands plain values to
a core function; the core raises `HfreleaseError`s, which `main` prints once, with the hint saying what
to do next, and a traceback only when HFRELEASE_DEBUG is set.
"""

from __future__ import annotations

import os
import sys

import click

from hfrelease import __version__
from hfrelease.cli import check, compare, demo, eval, hub, init, ledger, preview, publish, release, render, verify
from hfrelease.errors import ExitCode

DEBUG_VARIABLE = "HFRELEASE_DEBUG"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="hfrelease")
@click.option("-v", "--verbose", count=True, help="More detail (repeat for more).")
@click.pass_context
def cli(ctx: click.Context, verbose: int) -> None:
    """Evaluate, render and publish a family of LLM artifacts on the Hugging Face Hub.

    \b
    hfrelease check     validate a family's release.toml
    hfrelease eval      serve every artifact with vLLM, run gates and speed anchors, record results
    hfrelease render    model cards, citations and plots from recorded results
    hfrelease preview   the rendered cards as the Hub shows them (static HTML or served locally)
    hfrelease bundle    plan the files of each repo (dry run of publish)
    hfrelease publish   push each repo in one atomic, tagged commit, all-or-nothing
    hfrelease verify    download the release back, check it against its MANIFEST, serve one artifact
    hfrelease release   the whole job graph on one machine (what CI runs on a tag)
    hfrelease compare   what changed between two releases, refs or ledgers, with the evidence
    hfrelease init      scaffold a new family directory

    Exit codes: 0 ok, 2 usage, 3 bad manifest, 4 gate failed, 5 server failed, 6 measurement void,
    7 Hub request or publish failed, 9 environment missing, 10 a release workflow step failed,
    130 interrupted; 1 is a bug.
    """
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
    # Every Hub request of the command is bounded and read requests retried (a silent Hub must not hang).
    from hfrelease.hub_client import install

    install()


for command in (
    check.check,
    compare.compare,
    eval.eval_,
    render.render,
    preview.preview,
    publish.bundle,
    publish.publish,
    verify.verify,
    release.release,
    init.init,
    demo.demo,
    hub.hub,
    ledger.ledger,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: runs the command and exits with its documented exit code."""
    from hfrelease.cli.output import print_error

    debug = bool(os.environ.get(DEBUG_VARIABLE))
    try:
        # standalone_mode=False: errors reach the handlers below; ctx.exit(n) comes back as n.
        code = cli.main(args=argv, prog_name="hfrelease", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print_error("interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # an HfreleaseError, a Hub's failure, or a bug: one message, one code
        if debug:
            raise
        from hfrelease.stages.runner import failure_of

        message, hint, exit_code = failure_of(exc, debug_variable=DEBUG_VARIABLE)
        print_error(message, hint=hint)
        sys.exit(int(exit_code))
    sys.exit(code if isinstance(code, int) else 0)
