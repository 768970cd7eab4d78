"""The repository's own `.github/` files, rendered from templates/github/ for the flagship family.

After changing a template (or the action pins in `hfrelease.ci.workflows`), re-render them with
`.venv/bin/python tests/ci/flagship.py`; test_workflow_files.py fails until the committed files match.
`.github/workflows/ci.yml` is not among them: it runs the repository's test suite, not a family's check.
"""

from __future__ import annotations

from pathlib import Path

from hfrelease.ci.workflows import WorkflowSpec, render_workflows
from hfrelease.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = "model_cards/nanbeige4.2-3b/release.toml"
# hfrelease is installed from the checkout itself: this repository is the tool as well as the flagship, and
# `.` is an install line `hfrelease check` accepts (hfrelease.ci.install). Rendering its workflows
# needs none of the files the preflight checks, so the manifest is loaded without it.
# Its lock files are the ones hfrelease ships (templates/locks/), not copies under .github/locks/.
SPEC = WorkflowSpec(manifest=MANIFEST, install=".", runner_label="gpu", environment="release",
                    lock_dir="templates/locks")
FILES = ("workflows/release.yml", "actionlint.yaml", "dependabot.yml")


def render() -> dict[str, str]:
    """The flagship's files as the templates render them now, by path under `.github/`."""
    texts = render_workflows(load_manifest(ROOT / MANIFEST, check_files=False), SPEC)
    return {name: texts[name] for name in FILES}


if __name__ == "__main__":
    for name, text in render().items():
        path = ROOT / ".github" / name
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
