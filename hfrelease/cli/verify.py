"""`hfrelease verify`: download the release back from the Hub, check it, and serve one artifact from it."""

from __future__ import annotations

from pathlib import Path

import click

from hfrelease.cli import options


@click.command()
@options.MANIFEST
@options.HUB
@options.hub_root()
@options.artifacts("Verify only")
@click.option("--bundle", "bundle_dir", type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="A bundle directory (`hfrelease bundle --out DIR`) to compare with (default: the MANIFESTs "
                   "`publish` kept in <family>/.hfrelease/bundle/<tag>/, when present).")  # fmt: skip
@click.option("--attested-by", "attested_by", metavar="OWNER/REPO",
              help="Also check each release's attestation signature: signed by a GitHub Actions run of this "
                   "repository (needs the sigstore package and network access to Sigstore).")
@click.option("--serve", "serve_id", help="Also serve this artifact's downloaded copy with vLLM and ask it a question.")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False),
              help="Where to download (default: a temp dir).")
@options.as_json("the result")
def verify(
    manifest: Path, hub: str | None, hub_root: Path | None, artifacts: tuple[str, ...], bundle_dir: Path | None,
    serve_id: str | None, out: Path | None, as_json: bool, attested_by: str | None = None,
) -> None:  # fmt: skip
    """Download each published repo's release tag fresh and check every file.

    Each file is compared with the release's MANIFEST, the Hub's LFS oid (git blob id for regular files)
    and the local bundle, when there is one. Every repo is checked and reported; exit 7 if any fails.
    """
    from hfrelease.cli.output import print_json, say, show, working
    from hfrelease.stages.publish import VerifySettings, verify_stage
    from hfrelease.stages.publish_view import verify_view

    settings = VerifySettings(manifest=manifest, out=out, hub=hub, hub_root=hub_root, artifacts=artifacts,
                              bundle_dir=bundle_dir, serve=serve_id, attested_by=attested_by)
    report = verify_stage(settings, announce=say,
                          serving=lambda artifact: working(f"serving the downloaded {artifact} with vLLM"))
    print_json(report.as_dict()) if as_json else show(verify_view(report))
    if report.error is not None:
        raise report.error
