"""Every documented exit code, each reached the way a user reaches it; and a sweep of fault cases, none exit 1.

Exit 1 is for bugs only: every fault below (a server that fails, dies or loses its engine; a Hub that
refuses the token, limits the rate, fails, drops the connection, has no collections or loses a reply)
must end in its own documented code, with a message and no "This is a bug in hfrelease". The servers are
the built-in Hub with fault injection (hfrelease/hub/faults.py) and a fake OpenAI server
(tests/fake_openai.py), since neither the Hub nor vLLM fails on cue.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hfrelease.errors import ExitCode
from hfrelease.hub import FaultRule, HubServer, serve
from tests.conftest import ROOT, CliRun
from tests.fake_openai import FakeOpenAI, Mode
from tests.publish_family import TOKEN, make_family

pytestmark = pytest.mark.usefixtures("lm_eval_logging")

BUG = "This is a bug in hfrelease"
REFERENCE, FP8 = "upstream/Fixture-1M", "tester/Fixture-1M-FP8-Dynamic"


def documented_codes() -> dict[int, str]:
    """The README's exit-code table: {code: meaning}."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("### Exit codes") :].split("\n\n")[1]
    return {int(m[1]): m[2] for m in re.finditer(r"^\| (\d+) \| (.+) \|$", table, re.MULTILINE)}


def test_the_readme_documents_every_exit_code() -> None:
    """The README's table and `ExitCode` name the same codes."""
    assert set(documented_codes()) == {int(code) for code in ExitCode}


@pytest.fixture
def hub(tmp_path: Path, isolated_hub_client: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """The built-in Hub with fault injection, and HF_TOKEN set to its token."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HFRELEASE_CACHE", str(tmp_path / "hfrelease-cache"))
    server = serve(tmp_path / "hub", tokens=[TOKEN], fault_injection=True)
    yield server
    server.shutdown()


class Sweep:
    """What one case needs: the CLI, a family with a gate, fake servers, the Hub (each made only when asked)."""

    def __init__(self, request: pytest.FixtureRequest, cli: CliRun, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
        self.request, self.cli, self.tmp_path, self.monkeypatch = request, cli, tmp_path, monkeypatch

    @property
    def family(self) -> Path:
        family: Path = self.request.getfixturevalue("gate_family")
        return family

    def server(self, model: str, mode: Mode = "right", **options: object) -> FakeOpenAI:
        fake: type[FakeOpenAI] = self.request.getfixturevalue("fake_server")
        return fake(model, mode=mode, **options).start()  # type: ignore[arg-type]

    def eval(self, artifact: str, server: FakeOpenAI) -> tuple[int, str]:
        run_dir = self.tmp_path / f"run-{artifact}"
        code, _, err = self.cli(["eval", str(self.family), "--artifact", artifact, "--gate", "arith",
                                 "--endpoint", server.url, "--run-dir", str(run_dir)])  # fmt: skip
        return code, err

    def publish(self, *faults: FaultRule, token: str = TOKEN) -> tuple[int, str]:
        hub: HubServer = self.request.getfixturevalue("hub")
        family = self.tmp_path / "publish-family"
        if not family.exists():
            make_family(family)
        for fault in faults:
            hub.faults.add(fault)
        self.monkeypatch.setenv("HF_TOKEN", token)
        code, _, err = self.cli(["publish", str(family), "--hub", hub.url])
        hub.faults.clear()
        return code, err

    def raising(self, error: BaseException) -> tuple[int, str]:
        """`check` with manifest loading raising `error` (what the CLI makes of it)."""

        def load(*args: object, **kwargs: object) -> None:
            raise error

        self.monkeypatch.setattr("hfrelease.manifest.load_manifest", load)
        code, _, err = self.cli(["check", str(ROOT / "tests" / "fixtures" / "family"), "--no-preflight"])
        return code, err


def _gate_failed(s: Sweep) -> tuple[int, str]:
    assert s.eval("ref", s.server(REFERENCE, "right"))[0] == ExitCode.OK
    return s.eval("fp8", s.server(FP8, "wrong"))


def _bad_manifest(s: Sweep) -> tuple[int, str]:
    manifest = s.tmp_path / "bad" / "release.toml"
    manifest.parent.mkdir()
    manifest.write_text("schema_version = 2\n")
    code, _, err = s.cli(["check", str(manifest), "--no-preflight"])
    return code, err


def _no_build(s: Sweep) -> tuple[int, str]:
    code, _, err = s.cli(["demo", "pin", str(s.family), "--build", str(s.tmp_path / "no-build")])
    return code, err


def _foreign_step(s: Sweep) -> tuple[int, str]:
    """`release` over a workflow whose one step is a shell's `exit 1`: not hfrelease's bug, its own code."""
    import shutil

    repo = s.tmp_path / "repo"
    shutil.copytree(ROOT / "tests" / "fixtures" / "family", repo / "fam")
    workflow = repo / ".github" / "workflows" / "release.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("name: release\non: {push: {tags: ['v*']}}\nenv: {MANIFEST: fam/release.toml}\n"
                        "jobs:\n  check:\n    runs-on: ubuntu-latest\n    steps:\n      - run: exit 1\n")
    code, _, err = s.cli(["release", str(repo / "fam"), "--hub", "manifest", "--work", str(s.tmp_path / "work")])
    return code, err


EVERY_CODE: dict[ExitCode, Callable[[Sweep], tuple[int, str]]] = {
    ExitCode.OK: lambda s: s.eval("fp8", s.server(FP8, "right")),
    # Only a bug exits 1: one is planted where the manifest is read.
    ExitCode.INTERNAL: lambda s: s.raising(ZeroDivisionError("a planted bug")),
    ExitCode.USAGE: lambda s: s.cli(["eval", str(s.family), "--endpoint", "http://127.0.0.1:9"])[::2],
    ExitCode.CONFIG: _bad_manifest,
    ExitCode.GATE_FAILED: _gate_failed,
    ExitCode.SERVER_FAILED: lambda s: s.eval("fp8", s.server(FP8, "engine-dead")),
    ExitCode.MEASUREMENT_FAILED: lambda s: s.eval("fp8", s.server(FP8, "error500")),
    ExitCode.PUBLISH_FAILED: lambda s: s.publish(token="hf_wrong_0123456789abcdef"),
    ExitCode.ENVIRONMENT: _no_build,
    ExitCode.STEP_FAILED: _foreign_step,
    ExitCode.INTERRUPTED: lambda s: s.raising(KeyboardInterrupt()),
}


@pytest.mark.parametrize("code", list(ExitCode), ids=lambda c: f"{int(c)}-{c.name}")
def test_every_documented_exit_code(
    code: ExitCode, request: pytest.FixtureRequest, cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each documented code comes from its own case; only the planted bug says "a bug"."""
    got, err = EVERY_CODE[code](Sweep(request, cli, tmp_path, monkeypatch))
    assert got == code, err
    assert (BUG in err) == (code == ExitCode.INTERNAL), err


FAULTS: dict[str, tuple[ExitCode, Callable[[Sweep], tuple[int, str]]]] = {
    "server answers 500 to every request": (ExitCode.MEASUREMENT_FAILED,
                                            lambda s: s.eval("fp8", s.server(FP8, "error500"))),
    "engine dead, process alive (503)": (ExitCode.SERVER_FAILED, lambda s: s.eval("fp8", s.server(FP8, "engine-dead"))),
    "attached endpoint dies mid-gate": (ExitCode.SERVER_FAILED, lambda s: s.eval("fp8", s.server(FP8, die_after=4))),
    "Hub 401: wrong token": (ExitCode.PUBLISH_FAILED, lambda s: s.publish(token="hf_wrong_0123456789abcdef")),
    "Hub 403 on commits": (ExitCode.PUBLISH_FAILED, lambda s: s.publish(FaultRule(endpoint="commit", status=403,
                                                                                   times=None))),
    "Hub 429 on a planning read": (ExitCode.PUBLISH_FAILED, lambda s: s.publish(
        FaultRule(endpoint="repo-info", status=429, retry_after=0, times=None))),
    "Hub 500 on a write": (ExitCode.PUBLISH_FAILED, lambda s: s.publish(FaultRule(endpoint="branch-create",
                                                                                   status=500, times=None))),
    "Hub drops connections": (ExitCode.PUBLISH_FAILED, lambda s: s.publish(
        FaultRule(endpoint="repo-info", drop_connection=True, times=None))),
    "Hub without collections": (ExitCode.OK, lambda s: s.publish(
        FaultRule(endpoint="collection-create", status=404, times=None))),
    "lost reply to a tag": (ExitCode.OK, lambda s: s.publish(
        FaultRule(endpoint="tag-create", drop_connection=True, after=True, times=None))),
    "lost reply to a commit": (ExitCode.OK, lambda s: s.publish(
        FaultRule(endpoint="commit", drop_connection=True, after=True, times=None))),
    "lost reply to a repo creation": (ExitCode.OK, lambda s: s.publish(
        FaultRule(endpoint="repo-create", drop_connection=True, after=True, times=None))),
}


@pytest.mark.parametrize("case", list(FAULTS))
def test_fault_sweep_never_exits_1(
    case: str, request: pytest.FixtureRequest, cli: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each fault ends in its documented code with at most one error message, never exit 1 or "a bug"."""
    expected, run = FAULTS[case]
    code, err = run(Sweep(request, cli, tmp_path, monkeypatch))
    assert code == expected, err
    assert BUG not in err and "Task exception was never retrieved" not in err
    assert err.count("error:") <= 1, err  # a void gate is a row of the table, a stop one message


def test_a_rehearsal_passes_on_only_the_codes_that_are_hfreleases() -> None:
    """A failed step's documented code passes through; 1, a foreign code or no step is STEP_FAILED, never 1."""
    from hfrelease.ci.actions.run import StepResult
    from hfrelease.ci.rehearsal import stopped_code

    def step(code: int | None) -> StepResult:
        return StepResult(label="run", status="failure", exit_code=code)

    assert stopped_code(step(4)) == ExitCode.GATE_FAILED
    assert stopped_code(step(None)) == ExitCode.CONFIG
    for foreign in (1, 10, 127, 255):
        assert stopped_code(step(foreign)) == ExitCode.STEP_FAILED
    assert stopped_code(None) == ExitCode.STEP_FAILED
