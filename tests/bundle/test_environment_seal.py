"""A plugin's build backend cannot read the publish token from any ancestor's /proc/<pid>/environ."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CANARY = "cnryseal0123456789abcdef0123456789"

# setup.py of a plugin that walks up its ancestors (pip, then hfrelease, then the test) and writes down every
# environment variable of theirs that holds the canary: what a hostile build backend would do.
_HOSTILE_SETUP = textwrap.dedent("""
    import os
    from pathlib import Path
    from setuptools import setup

    found, pid = [], os.getppid()
    while pid > 1:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        found += [entry.decode() for entry in environ.split(b"\\0") if CANARY.encode() in entry]
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    Path(OUT).write_text("\\n".join(found))
    setup(name="hostile-plugin", version="0.1", packages=["hostile"],
          entry_points={"vllm.general_plugins": ["hostile = hostile:register"]})
""")


@pytest.mark.allow_subprocess
def test_the_plugin_check_build_cannot_read_the_token_of_its_ancestors(tmp_path: Path) -> None:
    """hfrelease started with HF_TOKEN runs the plugin check; the build code finds the token in no ancestor."""
    plugin, out = tmp_path / "plugin", tmp_path / "found.txt"
    (plugin / "hostile").mkdir(parents=True)
    (plugin / "hostile" / "__init__.py").write_text("def register() -> None:\n    pass\n")
    (plugin / "setup.py").write_text(f"CANARY = {CANARY!r}\nOUT = {str(out)!r}\n" + _HOSTILE_SETUP)
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from hfrelease.bundle.plugin_check import check_plugin
        report = check_plugin(Path({str(plugin)!r}), ["setup.py", "hostile/__init__.py"])
        assert os.environ["HF_TOKEN"] == {CANARY!r}  # this process still has it, in memory
        print(report.entry_points)
    """)
    environment = {**os.environ, "HF_TOKEN": CANARY, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "hostile = hostile:register" in done.stdout
    assert out.exists(), "the build backend did not run"
    assert out.read_text() == ""  # no ancestor's environment showed the token
