"""A gate's code holds no credential: HF_TOKEN and every variable `hfrelease.redact` treats as a secret stay out of
custom gates (command and entry point) and lm-eval gate processes (issue 28, "A token is published").

Each gate here writes down what a hostile gate would look for: the secret variables in its `os.environ`, whether
the secret values occur anywhere in its environment or in its own `/proc/self/environ`, and a harmless variable
that must still arrive (so an empty environment cannot pass for a clean one).
"""

from __future__ import annotations

import json
import os
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from hfrelease.evaluation.custom_gate import run_custom_gate
from hfrelease.ledger.store import Ledger
from hfrelease.manifest.model import Gate
from tests.conftest import CliRun
from tests.fake_openai import FakeOpenAI

SECRETS = {
    "HF_TOKEN": "cnrygate0123456789abcdef0123456789",  # no token shape: only the names make these secrets
    "HUGGING_FACE_HUB_TOKEN": "cnryhub0123456789abcdef0123456789",
    "DEPLOY_API_KEY": "cnrykey0123456789abcdef0123456789",
}
SHAPED = "hf_" + "Cn7" * 10  # a token by its shape, under a name that says nothing (redacted, never passed on)

# What the gate saw, as a dict: the hostile gate's probe (the same code in a command, an entry point, a task).
PROBE = textwrap.dedent("""
    import os
    from pathlib import Path

    def seen(secrets, shaped):
        environ = Path("/proc/self/environ").read_bytes().decode("utf-8", "replace")
        values = "\\0".join(f"{k}={v}" for k, v in os.environ.items())
        planted = [*secrets.values(), shaped]
        return {"variables": {name: os.environ.get(name) for name in secrets},
                "in_environ": [v for v in planted if v in values],
                "in_proc_environ": [v for v in planted if v in environ],
                "probe": os.environ.get("HFRELEASE_PROBE"), "notes": os.environ.get("RELEASE_NOTES")}
""") + f"SECRETS = {SECRETS!r}\nSHAPED = {SHAPED!r}\n"
CLEAN = {"variables": dict.fromkeys(SECRETS), "in_environ": [], "in_proc_environ": [], "probe": "visible",
         "notes": "pushed with ***"}


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """hfrelease runs with the secrets (and a token-shaped value under a plain name) in its environment."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RELEASE_NOTES", f"pushed with {SHAPED}")
    monkeypatch.setenv("HFRELEASE_PROBE", "visible")


def _report(seen: str) -> str:
    """A gate's report carrying what it saw in its one sample's response."""
    return f"{{'metrics': {{'rate': 1.0}}, 'samples': [{{'id': 'env', 'score': 1, 'response': json.dumps({seen})}}]}}"


@pytest.mark.unit
@pytest.mark.allow_subprocess
@pytest.mark.usefixtures("secrets")
@pytest.mark.parametrize("kind", ["command", "entry_point"])
def test_custom_gate_sees_no_secret(tmp_path: Path, kind: str) -> None:
    """A command gate and an entry-point gate, run for real against a server URL they never call, find none of
    the secrets in os.environ or /proc/self/environ; the harmless variable arrives, the shaped token redacted."""
    if kind == "command":
        (tmp_path / "leaky_gate.py").write_text(
            "import argparse, json\n" + PROBE + textwrap.dedent(f"""
            parser = argparse.ArgumentParser()
            for option in ("--base-url", "--model", "--out", "--max-tokens", "--seed", "--mode"):
                parser.add_argument(option)
            Path(parser.parse_args().out).write_text(json.dumps({_report("seen(SECRETS, SHAPED)")}))
            """))  # fmt: skip
        gate = Gate(id="leak", command=["python", "leaky_gate.py"], mode="non-thinking", max_tokens=8,
                    metric="rate", margin=0.1)  # fmt: skip
    else:
        (tmp_path / "leaky_module.py").write_text(
            "import json\n" + PROBE + "\ndef run(**_):\n    return " + _report("seen(SECRETS, SHAPED)") + "\n"
        )
        gate = Gate(id="leak", entry_point="leaky_module:run", mode="non-thinking", max_tokens=8, metric="rate",
                    margin=0.1)  # fmt: skip
    run = run_custom_gate(gate, base_url="http://127.0.0.1:9", model="m/x", cwd=tmp_path)
    assert json.loads(run.samples[0]["response"]) == CLEAN


FP8 = "tester/Fixture-1M-FP8-Dynamic"


@pytest.mark.usefixtures("lm_eval_logging", "secrets")
def test_lm_eval_gate_process_sees_no_secret(
    cli: CliRun, gate_family: Path, fake_server: type[FakeOpenAI], tmp_path: Path
) -> None:
    """The task's own code (a `process_docs` function, run in the gate's process of the concurrent schedule)
    finds no secret in its environment, nor in its /proc/self/environ (a copy of the forkserver's memory); the
    gate still measures."""
    seen = tmp_path / "seen"
    seen.mkdir()
    tasks = gate_family / "tasks"
    (tasks / "leak.py").write_text("import json\n" + PROBE + textwrap.dedent(f"""
        def process_docs(dataset):
            Path({str(seen)!r}, str(os.getpid())).write_text(json.dumps(seen(SECRETS, SHAPED)))
            return dataset
        """))  # fmt: skip
    task = tasks / "fault_arith.yaml"
    task.write_text(task.read_text() + "process_docs: !function leak.process_docs\n")
    path = gate_family / "release.toml"
    manifest: dict[str, Any] = tomllib.loads(path.read_text())
    manifest["eval"] = {"schedule": "concurrent", "in_flight": 4}
    path.write_text(tomli_w.dumps(manifest))
    server = fake_server(FP8).start()
    code, out, err = cli(["eval", str(gate_family), "--artifact", "fp8", "--endpoint", server.url, "--force",
                          "--run-dir", str(tmp_path / "run"), "--json"])  # fmt: skip
    assert code in (0, 4), err
    assert json.loads(out)["loads"][0]["schedule"] == "concurrent"
    gates = {int(p.name): json.loads(p.read_text()) for p in seen.iterdir() if int(p.name) != os.getpid()}
    assert gates and all(found == CLEAN for found in gates.values()), gates
    [record] = Ledger(gate_family / "results").records(artifact_id="fp8", subject_id="arith", kind="gate")
    assert record.status == "ok"
