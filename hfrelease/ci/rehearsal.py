"""`hfrelease release`: the family's release workflow file, executed on this machine before a tag is pushed.

The rehearsal reads `.github/workflows/release.yml` (the file GitHub runs on the tag; `hfrelease init
--github` writes it from templates/github/release.yml.j2) and runs it with `hfrelease.ci.actions`: every job
in a fresh directory, its `run:` steps as written, through the same CLI, as subprocesses; `needs`, `if:`,
the matrix from the check job's output; artifacts passed only through upload-artifact/download-artifact
with their documented semantics. Checkout, setup-python and the pip installs are substituted (the job
reports say with what). So what GitHub would do wrong -- a hidden file an artifact drops, a download of
an artifact no job uploaded, a job that does not wait for the one it reads from -- goes wrong here first.

The Hub: with `--hub local` the built-in Hub runs for the length of the rehearsal, and the jobs see it as a
runner sees the real Hub: `HF_ENDPOINT` in their environment, and the publish job's `secrets.HF_TOKEN` is
its token. With a URL, jobs get that `HF_ENDPOINT` and the token of this environment (`HF_TOKEN`).

Jobs check out the commit the tag would be pushed on (HEAD), not the work tree on disk: the report names it
and lists what on disk differs from it (untracked files and uncommitted edits, which no job sees).

A job's environment is a runner's, not this shell's: a few variables describing the machine (`runner_env`:
PATH, HOME, locale, the accelerator's and vLLM's settings, the offline switches), never one holding a
credential; everything else a job has comes from the workflow's `env` and the `secrets.*` its steps name.

A runner downloads a Hub source from the Hub, never from this machine's cache: each job gets an empty
`HF_HOME` of its own (this environment's HF cache variables are not passed on), and with `--hub local` every
pinned `{ hub, revision }` source must be on the rehearsal's Hub before a job starts (a fresh Hub holds no
vendor repo: the eval jobs would 404), else exit 3 naming each one and the way out (`--hub URL`, `--hub-root`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hfrelease.ci.actions.run import JobResult, RunEvents, RunResult, RunSettings, StepResult
from hfrelease.ci.actions.runner import run_workflow
from hfrelease.ci.actions.workflow import Workflow, load_workflow
from hfrelease.ci.github import CiEnvironment, append_summary, markdown_table
from hfrelease.errors import ConfigError, ConfigProblem, ExitCode, HfreleaseError, UsageError
from hfrelease.hub.oidc import OidcSettings
from hfrelease.manifest import Manifest, find_manifest, load_manifest
from hfrelease.publish import LOCAL, open_hub, resolve_token

# What a runner's own environment may carry over from this machine: its shell basics, and the settings of the
# machine's accelerator, threads, vLLM and hfrelease (a self-hosted runner's `.env`), and the offline switches
# (scripts/offline.sh). Anything else -- tokens, keys, this shell's Hugging Face cache -- reaches a job only
# through the workflow's `env:` and `secrets.*`, as on GitHub.
_RUNNER_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
                           "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
                           "HF_HUB_DISABLE_XET", "DO_NOT_TRACK"})
_RUNNER_PREFIXES = ("HFRELEASE_", "LC_", "VLLM_", "OMP_", "KMP_", "MKL_", "CUDA_", "NCCL_", "TORCH", "PYTORCH_")
_CREDENTIAL = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH")


def runner_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of `env` a job's runner has too (see `_RUNNER_NAMES`); a name that looks like a credential never."""
    return {name: value for name, value in env.items()
            if (name in _RUNNER_NAMES or name.startswith(_RUNNER_PREFIXES))
            and not any(word in name.upper() for word in _CREDENTIAL)}


# `--hub manifest`: the manifest's [publish].endpoint, so a workflow never restates where the family goes.
MANIFEST_HUB = "manifest"
WORKFLOW = Path(".github") / "workflows" / "release.yml"


class ReleaseStoppedError(HfreleaseError):
    """A job of the workflow failed; the exit code is that of the first failing step when it is one of ours."""

    def __init__(self, message: str, *, exit_code: ExitCode, hint: str | None = None) -> None:
        self.exit_code = exit_code  # first: HfreleaseError refuses an error without one
        super().__init__(message, hint=hint)


@dataclass(frozen=True, kw_only=True)
class RehearsalReport:
    """What ran and how it ended; `error` is what stopped the release (None when every job succeeded)."""

    family: str
    tag: str
    hub: str  # the endpoint the jobs saw
    work_dir: Path
    workflow: Path
    run: RunResult | None = None
    error: HfreleaseError | None = None
    commit: str | None = None  # what actions/checkout gave the jobs (None: no commit, a copy of the directory)
    uncommitted: tuple[str, ...] = ()  # paths on disk that differ from that commit (no job saw them)

    def checkout_note(self) -> str:
        """Which tree the jobs saw, and what on disk they did not."""
        if self.commit is None:
            return "the jobs saw a copy of the directory: it is not a git repository with a commit to push"
        text = f"the jobs saw commit {self.commit[:12]} (HEAD), as actions/checkout gives it"
        if self.uncommitted:
            shown = ", ".join(self.uncommitted[:5]) + (f" and {len(self.uncommitted) - 5} more"
                                                        if len(self.uncommitted) > 5 else "")
            text += (f"; {len(self.uncommitted)} path(s) on disk differ from it and were not in any job: {shown} "
                     "(commit them to rehearse them)")
        return text

    @property
    def jobs(self) -> tuple[JobResult, ...]:
        return self.run.jobs if self.run is not None else ()

    @property
    def exit_code(self) -> ExitCode:
        return self.error.exit_code if self.error is not None else ExitCode.OK


def find_workflow(manifest_file: Path) -> Path:
    """The release workflow of the repository holding `manifest_file`: the nearest `.github/workflows/release.yml`."""
    for directory in manifest_file.resolve().parents:
        if (directory / WORKFLOW).is_file():
            return directory / WORKFLOW
    raise _no_workflow(manifest_file)


def _no_workflow(manifest_file: Path) -> ConfigError:
    error = ConfigError("hfrelease release", [ConfigProblem(
        location=str(manifest_file.parent), message=f"no {WORKFLOW} in this directory or any above it")])
    error.hint = ("The rehearsal runs the release workflow GitHub would run: write it with "
                  "`hfrelease release MANIFEST --write-workflow --root REPO` (or `hfrelease init --github`).")
    return error


def repository_of(workflow_file: Path) -> Path:
    """The repository root a workflow file belongs to (the directory holding `.github/`)."""
    return workflow_file.resolve().parents[2]


def _check_manifest_env(workflow: Workflow, root: Path, manifest_file: Path) -> None:
    """The workflow must release this manifest: its MANIFEST names it, from the repository root."""
    named = workflow.env.get("MANIFEST")
    if named is None or (root / str(named)).resolve() != manifest_file.resolve():
        raise ConfigError(str(workflow.path), [ConfigProblem(
            location="env.MANIFEST",
            message=f"the workflow releases {named!r}, not {manifest_file.resolve().relative_to(root)}"
            if manifest_file.resolve().is_relative_to(root) else
            f"the workflow releases {named!r}; {manifest_file} is outside its repository {root}")])


@contextmanager
def _hub_for_jobs(hub: str, *, manifest: Manifest, family_root: Path, hub_root: Path,
                  oidc: OidcSettings | None = None) -> Iterator[tuple[str | None, str | None, dict[str, str]]]:
    """(HF_ENDPOINT, HF_TOKEN, the id-token variables) the jobs get: the built-in Hub's for `local` (with
    `oidc`, trusted publishing: no token, the Hub's id-token endpoint), else this environment's."""
    if hub == LOCAL:
        with open_hub(LOCAL, family_root=family_root, hub_root=hub_root, oidc=oidc) as target:
            value = target.token.value if target.token else None
            _require_pinned_sources(manifest, endpoint=target.endpoint, token=value, hub_root=hub_root)
            if oidc is None or value is None:
                yield target.endpoint, value, {}
                return
            from hfrelease.ci.trusted_hub import create_repos, id_token_env

            create_repos(manifest, endpoint=target.endpoint, token=value)
            yield target.endpoint, None, id_token_env(target.endpoint, oidc)
        return
    token = resolve_token()
    yield (None if hub == MANIFEST_HUB else hub.rstrip("/")), token.value if token else None, {}


def rehearse(
    manifest_path: Path,
    *,
    work_dir: Path,
    hub: str = LOCAL,
    tag: str | None = None,
    hub_root: Path | None = None,
    workflow_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    events: RunEvents | None = None,
    trusted: bool = False,
) -> RehearsalReport:
    """Run the release workflow for `tag` (default: the manifest's own); never raises for a job's failure.

    `env` is the runner's environment (default: this process's); the run's step summaries are appended to
    its `GITHUB_STEP_SUMMARY` when set. `work_dir` holds the jobs' workspaces, the artifacts and the logs.
    `trusted` (with `--hub local`): no `secrets.HF_TOKEN`; publish through the Hub's OIDC exchange
    (`trusted_hub.py`).
    """
    if trusted and hub != LOCAL:
        raise UsageError("--trusted rehearses trusted publishing through the built-in Hub's OIDC exchange: it needs "
                         "--hub local", hint="Drop --trusted to rehearse against another Hub with HF_TOKEN.")
    env = dict(os.environ if env is None else env)
    manifest_file = find_manifest(manifest_path)
    manifest = load_manifest(manifest_file, check_files=False)  # the check job checks the rest
    release_tag = tag or manifest.tag_name()
    workflow_file = workflow_file or find_workflow(manifest_file)
    workflow = load_workflow(workflow_file)
    root = repository_of(workflow_file)
    _check_manifest_env(workflow, root, manifest_file)
    work_dir = work_dir.resolve()
    if work_dir.exists():
        shutil.rmtree(work_dir / "jobs", ignore_errors=True)
        shutil.rmtree(work_dir / "artifacts", ignore_errors=True)
        shutil.rmtree(work_dir / "logs", ignore_errors=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    hub_root = (hub_root or work_dir / "hub").resolve()
    from hfrelease.ci.actions.substitute import head_commit, uncommitted

    commit = head_commit(root)
    changed = tuple(p for p in uncommitted(root) if not _inside(root / p, (work_dir, hub_root))) if commit else ()
    outer_summary = CiEnvironment.detect(env).step_summary
    oidc = None
    if trusted:
        from hfrelease.ci.trusted_hub import oidc_settings

        oidc = oidc_settings(workflow, manifest, tag=release_tag)
    with _hub_for_jobs(hub, manifest=manifest, family_root=manifest.root, hub_root=hub_root,
                       oidc=oidc) as (endpoint, token, id_token):
        job_env = runner_env(env)  # a job gets a token only where the workflow passes it (secrets.HF_TOKEN)
        if endpoint is not None:
            job_env["HF_ENDPOINT"] = endpoint
        secrets = {"HF_TOKEN": token} if token else {}
        settings = RunSettings(workflow=workflow, source=root, commit=commit, work_dir=work_dir, ref_name=release_tag,
                               secrets=secrets, env=job_env, leave_out=(hub_root,), fresh_dirs=("HF_HOME",),
                               id_token=id_token)
        run = run_workflow(settings, events)
    report = RehearsalReport(family=manifest.family.name, tag=release_tag, hub=endpoint or hub, work_dir=work_dir,
                             workflow=workflow_file, run=run, error=_stopped(run), commit=commit, uncommitted=changed)
    if outer_summary is not None:
        append_summary(outer_summary, summary_markdown(report))
    return report


def _inside(path: Path, directories: Sequence[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved == d or d in resolved.parents for d in directories)


def _require_pinned_sources(manifest: Manifest, *, endpoint: str, token: str | None, hub_root: Path) -> None:
    """Exit 3 naming every `{ hub, revision }` source the rehearsal's built-in Hub does not hold at its commit.

    On GitHub the eval jobs download them from the Hub (`HF_ENDPOINT`); here that Hub starts from `hub_root`,
    which holds only what was published there: a vendor's repo is not in it unless its root was copied in.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi(endpoint=endpoint, token=token)
    problems = []
    for index, artifact in enumerate(manifest.artifact):
        repo, revision = artifact.source.hub, artifact.source.revision
        if repo is None or revision is None:
            continue
        try:
            api.repo_info(repo, revision=revision)
        except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
            missing = "no such repo" if isinstance(exc, RepositoryNotFoundError) else "no such commit"
            problems.append(ConfigProblem(location=f"artifact[{index}].source.hub", message=(
                f"{repo}@{revision[:12]} is not on the rehearsal's built-in Hub (root {hub_root}: {missing}); "
                "its eval jobs could not download it, as a runner does from the Hub")))
    if problems:
        error = ConfigError("hfrelease release --hub local", problems)
        error.hint = ("Rehearse against a Hub that holds the pinned sources: `--hub URL` (the Hub they are on, e.g. "
                      "one served with `hfrelease hub serve --root DIR`), or `--hub-root DIR` with a copy of the "
                      "built-in Hub's root they were uploaded to (scripts/demo copies build/demo/hub).")
        raise error


def _stopped(run: RunResult) -> HfreleaseError | None:
    failed = [j for j in run.jobs if j.result in ("failure", "cancelled")]
    if not failed:
        return None
    lines = "\n".join(f"  - {j.name}: {j.status}: {j.detail}" for j in failed)
    return ReleaseStoppedError(
        f"the release workflow stopped: {len(failed)} job(s) did not succeed:\n{lines}",
        exit_code=stopped_code(failed[0].failed_step()),
        hint="Each step's output is in its log (named above); jobs after a failed one were skipped, as on GitHub.")


def stopped_code(step: StepResult | None) -> ExitCode:
    """The rehearsal's exit code for a job that failed at `step`: the step's own when it is one of ours.

    1 is never passed on: the rehearsal did what it should, a step of the workflow failed. A step that is
    not hfrelease's (a script, `pytest`, a shell `exit 1`) or an hfrelease command that hit a bug (its log
    says so) ends the release with STEP_FAILED, as does a job that failed with no failed step.
    """
    ours = {int(c) for c in ExitCode} - {ExitCode.OK, ExitCode.INTERNAL, ExitCode.STEP_FAILED}
    if step is not None and step.exit_code in ours:
        return ExitCode(step.exit_code)
    if step is not None and step.exit_code is None:
        return ExitCode.CONFIG  # an artifact step or an expression: the workflow itself is wrong
    return ExitCode.STEP_FAILED


_MARKS = {"success": "✅ success", "failure": "❌ failure", "skipped": "⏭️ skipped", "cancelled": "🚫 cancelled"}


def summary_markdown(report: RehearsalReport) -> str:
    """The step summary of a rehearsal: its jobs, what stood in for steps, then what the steps wrote."""
    conclusion = "every job succeeded" if report.error is None else f"stopped (exit {int(report.exit_code)})"
    parts = [f"## Release {report.family} {report.tag}: {conclusion}",
             f"Rehearsed from `{report.workflow}` with the Hub at {report.hub}; {report.checkout_note()}."]
    if report.error is not None:
        parts.append("```\n" + report.error.message + "\n```")
    parts.append(markdown_table(("job", "conclusion", "time", "detail"), [
        (j.name, _MARKS[j.status], f"{j.seconds:.0f} s", j.detail) for j in report.jobs]))
    substituted = [(j.name, s) for j in report.jobs for s in j.substitutions()]
    if substituted:
        parts.append("Substituted steps:\n\n" + "\n".join(f"- {job}: {what}" for job, what in substituted))
    if report.run is not None and report.run.summary.strip():
        parts.append(report.run.summary.strip())
    return "\n\n".join(parts)


def write_release_workflow(manifest_file: Path, *, root: Path | None = None, force: bool = False) -> Path:
    """Write the family's `.github/workflows/release.yml` under `root` (as `init --github` renders it;
    default: the git checkout holding the manifest)."""
    from hfrelease.ci.workflows import LOCK_FILES, WorkflowSpec, lock_dir_for, render_workflows, repository_root
    from hfrelease.resources import templates_dir

    manifest_file = find_manifest(manifest_file).resolve()
    root = (root or repository_root(manifest_file.parent)).resolve()
    if not manifest_file.is_relative_to(root):
        raise ConfigError("--root", [ConfigProblem(location="--root", message=f"{manifest_file} is not inside {root}")])
    from hfrelease.ci.install import rehearsal_install

    spec = WorkflowSpec(manifest=manifest_file.relative_to(root).as_posix(), install=rehearsal_install(root),
                        lock_dir=lock_dir_for(root))
    text = render_workflows(load_manifest(manifest_file, check_files=False), spec)["workflows/release.yml"]
    path = root / WORKFLOW
    if path.exists() and not force and path.read_text(encoding="utf-8") != text:
        raise UsageError(f"{path} already exists and differs", hint="Pass --force to overwrite it.")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    # The install steps read the locks from the checked-out tree: a workflow without them fails on GitHub
    # (and in the rehearsal). Written where absent, as `init --github` writes them; an existing one is kept.
    for name in LOCK_FILES:
        lock = root / spec.lock_dir / name
        if not lock.exists():
            lock.parent.mkdir(parents=True, exist_ok=True)
            lock.write_text((templates_dir() / "locks" / name).read_text(encoding="utf-8"), encoding="utf-8")
    return path
