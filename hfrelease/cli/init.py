"""`hfrelease init`: scaffold a new family directory."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--name", required=True, help="Family id, e.g. mymodel-7b (lowercase).")
@click.option("--base-model", required=True, help="Upstream Hub repo the family derives from (owner/name).")
@click.option("--owner", required=True, help="Hub user or organization the family publishes under.")
@click.option("--display-name", help="Human name used in cards (default: the base model's name).")
@click.option("--license", "license_", default="apache-2.0", show_default=True, help="Hub license id.")
@click.option("--language", "languages", multiple=True, default=("en",), show_default=True,
              help="ISO 639 language code (repeatable).")
@click.option("--author", help="Author name for citations (default: the owner).")
@click.option("--force", is_flag=True, help="Overwrite an existing release.toml.")
@click.option("--github", is_flag=True,
              help="Also write .github/workflows/{ci,release}.yml (and .github/actionlint.yaml) at the repository's "
                   "root: check on every push, release on a tag.")
@click.option("--runner-label", default="gpu", show_default=True,
              help="With --github: label of the self-hosted GPU runners the eval matrix runs on.")
@click.option("--environment", default="release", show_default=True,
              help="With --github: the protected environment of the publish job (required reviewers, HF_TOKEN).")
@click.option("--install", "install", default="", metavar="SPEC",
              help="With --github: what the workflows `pip install` hfrelease from (hfrelease is not on PyPI): "
                   "git+https://.../hfrelease@<commit>, an https wheel URL, or a path in the repository. Default: "
                   "the git commit this hfrelease was installed from, when known.")
def init(
    directory: Path, name: str, base_model: str, owner: str, display_name: str | None, license_: str,
    languages: tuple[str, ...], author: str | None, force: bool, github: bool, runner_label: str = "gpu",
    environment: str = "release", install: str = "",
) -> None:
    """Scaffold DIRECTORY with a commented release.toml, sections/, results/ and prompts/."""
    from hfrelease.ci.scaffold import FamilySpec
    from hfrelease.ci.workflows import WorkflowSpec
    from hfrelease.cli.output import show
    from hfrelease.stages.init import InitSettings, init_stage, init_view

    ctx = click.get_current_context()
    given = [f"--{p.replace('_', '-')}" for p in ("runner_label", "environment", "install")
             if ctx.get_parameter_source(p) is not click.core.ParameterSource.DEFAULT]
    if given and not github:
        raise click.UsageError(f"{' and '.join(given)} only apply with --github")
    # The manifest path is filled in by the scaffold, relative to the repository root it finds.
    workflows = WorkflowSpec(manifest="release.toml", runner_label=runner_label, environment=environment,
                             install=install)
    family = FamilySpec(name=name, base_model=base_model, owner=owner, display_name=display_name, license=license_,
                        languages=languages, author=author)
    settings = InitSettings(directory=directory, family=family, github=workflows if github else None, force=force)
    show(init_view(init_stage(settings)))
