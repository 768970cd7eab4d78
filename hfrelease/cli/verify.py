"""`hfrelease verify`: download the release back from the Hub, check it, and serve one artifact from it."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("manifest", type=click.Path(path_type=Path), default=Path())
@click.option("--hub", help="Hub endpoint, or `local` for the built-in Hub (default: [publish].endpoint).")
@click.option("--hub-root", type=click.Path(path_type=Path), help="State directory of the local Hub.")
@click.option("--artifact", "artifacts", multiple=True, help="Verify only this artifact id (repeatable).")
@click.option("--serve", "serve_id", help="Also serve this artifact's downloaded copy with vLLM and ask it a question.")
@click.option("--out", type=click.Path(path_type=Path), help="Where to download (default: a temp dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def verify(
    manifest: Path, hub: str | None, hub_root: Path | None, artifacts: tuple[str, ...], serve_id: str | None,
    out: Path | None, as_json: bool,
) -> None:
    """Download each published repo's release tag fresh and check every file against its MANIFEST."""
    import tempfile

    from hfrelease.cli.output import err_console, make_table, out_console, print_json
    from hfrelease.manifest import load_manifest
    from hfrelease.publish import open_hub, resolve_token
    from hfrelease.verification import serve_downloaded, verify_family

    loaded = load_manifest(manifest)
    target_dir = out or Path(tempfile.mkdtemp(prefix="hfrelease-verify-"))
    with open_hub(hub or loaded.publish.endpoint, family_root=loaded.root, hub_root=hub_root,
                  announce=err_console.print) as target:
        token = target.token or resolve_token()
        verified = verify_family(loaded, endpoint=target.endpoint, token=token.value if token else None,
                                 out_dir=target_dir, artifacts=artifacts)
    served = None
    if serve_id is not None:
        copy = next((v.directory for v in verified if v.artifact_id == serve_id), None)
        if copy is None:
            raise click.UsageError(f"--serve {serve_id}: not among the verified artifacts")
        with err_console.status(f"serving the downloaded {serve_id} with vLLM"):
            served = serve_downloaded(loaded, serve_id, copy, log_path=target_dir / f"{serve_id}.server.log")
    if as_json:
        print_json({
            "verified": [{"artifact": v.artifact_id, "repo": v.repo, "tag": v.tag, "directory": str(v.directory),
                          "files": v.files} for v in verified],
            "served": None if served is None else {"artifact": served.artifact_id, "command": served.command,
                                                   "question": served.question, "answer": served.answer},
        })
        return
    table = make_table("artifact", "repo", "tag", "files", "downloaded to", title="Verified against MANIFEST")
    for v in verified:
        table.add_row(v.artifact_id, v.repo, v.tag, str(v.files), str(v.directory))
    out_console.print(table)
    if served is not None:
        out_console.print(f"served {served.artifact_id} from its downloaded copy: {served.command}", soft_wrap=True,
                          markup=False)
        out_console.print(f"  Q: {served.question}  A: {served.answer}", markup=False)
