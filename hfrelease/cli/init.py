"""`hfrelease init`: scaffold a new family directory."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--name", required=True, help="Family id, e.g. mymodel-7b (lowercase).")
@click.option("--base-model", required=True, help="Upstream Hub repo the family derives from (owner/name).")
@click.option("--owner", required=True, help="Hub user or organization the family publishes under.")
@click.option("--display-name", help="Human name used in cards (default: the base model's name).")
@click.option("--license", "license_", default="apache-2.0", show_default=True, help="Hub license id.")
@click.option("--language", "languages", multiple=True, default=("en",), show_default=True,
              help="ISO 639 language code (repeatable).")
@click.option("--author", help="Author name for citations (default: the owner).")
@click.option("--force", is_flag=True, help="Overwrite an existing release.toml.")
@click.option("--github", is_flag=True, help="Also write GitHub Actions release workflows (lands with the CI issue).")
def init(
    directory: Path, name: str, base_model: str, owner: str, display_name: str | None, license_: str,
    languages: tuple[str, ...], author: str | None, force: bool, github: bool,
) -> None:
    """Scaffold DIRECTORY with a commented release.toml, sections/, results/ and prompts/."""
    from hfrelease.cli.output import err_console
    from hfrelease.errors import NotBuiltError
    from hfrelease.scaffold import FamilySpec, scaffold_family

    if github:
        raise NotBuiltError("init --github", "GitHub Actions issue")
    spec = FamilySpec(
        name=name, base_model=base_model, owner=owner, display_name=display_name, license=license_,
        languages=languages, author=author,
    )
    written = scaffold_family(directory, spec, force=force)
    for path in written:
        err_console.print(f"  wrote {path}")
    err_console.print(f"[green]✓[/] scaffolded {directory}: edit release.toml, then `hfrelease check {directory}`")
