"""`hfrelease verify`: download the release back from the Hub, check it, and serve one artifact from it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from hfrelease.verification import ServedCheck, VerifiedRepo


@click.command()
@click.argument("manifest", type=click.Path(path_type=Path), default=Path())
@click.option("--hub", help="Hub endpoint, or `local` for the built-in Hub (default: [publish].endpoint).")
@click.option("--hub-root", type=click.Path(path_type=Path), help="State directory of the local Hub.")
@click.option("--artifact", "artifacts", multiple=True, help="Verify only this artifact id (repeatable).")
@click.option("--bundle", "bundle_dir", type=click.Path(path_type=Path),
              help="A bundle directory (`hfrelease bundle --out DIR`) to compare with (default: the MANIFESTs "
                   "`publish` kept in <family>/.hfrelease/bundle/<tag>/, when present).")  # fmt: skip
@click.option("--serve", "serve_id", help="Also serve this artifact's downloaded copy with vLLM and ask it a question.")
@click.option("--out", type=click.Path(path_type=Path), help="Where to download (default: a temp dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def verify(
    manifest: Path, hub: str | None, hub_root: Path | None, artifacts: tuple[str, ...], bundle_dir: Path | None,
    serve_id: str | None, out: Path | None, as_json: bool,
) -> None:  # fmt: skip
    """Download each published repo's release tag fresh and check every file.

    Each file is compared with the release's MANIFEST, the Hub's LFS oid (git blob id for regular files)
    and the local bundle, when there is one. Every repo is checked and reported; exit 7 if any fails.
    """
    import tempfile

    from hfrelease.cli.output import err_console
    from hfrelease.manifest import load_manifest
    from hfrelease.manifest.selection import select
    from hfrelease.publish import open_hub, resolve_token
    from hfrelease.verification import serve_downloaded, verification_error, verify_family

    loaded = load_manifest(manifest)
    artifacts = select(loaded, artifacts=artifacts, serve=serve_id).artifacts
    target_dir = out or Path(tempfile.mkdtemp(prefix="hfrelease-verify-"))
    with open_hub(hub or loaded.publish.endpoint, family_root=loaded.root, hub_root=hub_root,
                  announce=err_console.print) as target:
        token = target.token or resolve_token()
        verified = verify_family(loaded, endpoint=target.endpoint, token=token.value if token else None,
                                 out_dir=target_dir, artifacts=artifacts, bundle_dir=bundle_dir)
    error = verification_error(verified)
    served = None
    # A copy that failed its checks is not served: the answer would vouch for files nobody released.
    if serve_id is not None and error is None:
        copy = next((v.directory for v in verified if v.artifact_id == serve_id), None)
        if copy is None:
            raise click.UsageError(f"--serve {serve_id}: not among the verified artifacts")
        with err_console.status(f"serving the downloaded {serve_id} with vLLM"):
            served = serve_downloaded(loaded, serve_id, copy, log_path=target_dir / f"{serve_id}.server.log")
    _print(verified, served, as_json=as_json)
    if error is not None:
        raise error


def _repo_data(v: VerifiedRepo) -> dict[str, Any]:
    return {"artifact": v.artifact_id, "repo": v.repo, "tag": v.tag, "commit": v.commit, "ok": v.ok,
            "directory": str(v.directory), "files": v.files, "compared_with": list(v.compared_with),
            "local_bundle": str(v.local_bundle) if v.local_bundle else None, "problems": list(v.problems)}


def _print(verified: list[VerifiedRepo], served: ServedCheck | None, *, as_json: bool) -> None:
    from rich.markup import escape

    from hfrelease.cli.output import err_console, make_table, out_console, print_json

    if as_json:
        print_json({
            "ok": all(v.ok for v in verified),
            "verified": [_repo_data(v) for v in verified],
            "served": None if served is None else {"artifact": served.artifact_id, "command": served.command,
                                                   "question": served.question, "answer": served.answer},
        })  # fmt: skip
        return
    table = make_table("artifact", "repo", "tag", "result", "files", "compared with", "downloaded to",
                       title="Verified releases")
    for v in verified:
        result = "[green]ok[/]" if v.ok else f"[red]{len(v.problems)} problem(s)[/]"
        table.add_row(v.artifact_id, v.repo, v.tag, result, str(v.files), ", ".join(v.compared_with),
                      str(v.directory))
    out_console.print(table)
    # Each problem is named once, by the error that ends the command (`verification_error`).
    for v in verified:
        if v.ok and v.local_bundle is None:
            err_console.print(f"[yellow]note:[/] {escape(v.repo)}: no local bundle to compare with (the Hub's "
                              "MANIFEST and LFS oids only; pass --bundle DIR)", soft_wrap=True)
    if served is not None:
        out_console.print(f"served {served.artifact_id} from its downloaded copy: {served.command}", soft_wrap=True,
                          markup=False)
        out_console.print(f"  Q: {served.question}  A: {served.answer}", markup=False)
