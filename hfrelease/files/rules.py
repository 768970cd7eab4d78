"""Which files may go into a repo, by name: model files, secrets, pickles, caches, build litter.

Kept apart from the planning code so the rules read as one list a reviewer can check against what a
model repo holds on the Hub. Names are matched case-insensitively on the file's base name unless said.
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hfrelease.manifest import Artifact, Gate, Manifest

# Files of a checkpoint directory that belong in its repo without being declared (matched on the path
# relative to the artifact directory: weights anywhere, the rest at the top level).
MODEL_FILES = (
    "*.safetensors.index.json", "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "tokenizer.model", "special_tokens_map.json", "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
    "chat_template.jinja", "chat_template.json", "preprocessor_config.json", "processor_config.json",
    "recipe.yaml", "hf_quant_config.json", "quantization_config.json",
)  # fmt: skip
WEIGHTS = "*.safetensors"
REMOTE_CODE = "*.py"  # only with trust_remote_code: the code a `--trust-remote-code` server runs

# Formats that unpickle on load, i.e. run arbitrary code on whoever loads them. Matched on every suffix of
# the name, so a wrapped pickle is one too: `train_state.pth.tar` (torch.save's tar format), `x.pkl.gz`.
PICKLE_SUFFIXES = frozenset({
    ".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz", ".h5", ".hdf5", ".msgpack",
    ".dill", ".pdparams", ".nemo", ".mar", ".tar",
})  # fmt: skip

# Credentials people keep next to their work. `tokenizer*` must stay allowed, hence no bare `*token*`.
SECRETS = (
    ".env", ".env.*", "*.env", "token", "*.token", "hf_token*", ".hf_token", "*_token", "*_token.txt",
    ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", "credentials", "credentials.*",
    "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*", "id_ecdsa*", "secrets.*", ".secrets",
)  # fmt: skip

# Directories that are never part of a model: version control and caches (huggingface_hub's `local_dir`
# downloads leave `.cache/huggingface/` behind, Python leaves `__pycache__`).
VCS_DIRS = (".git", ".hg", ".svn")
CACHE_DIRS = ("__pycache__", ".cache", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox")
CACHE_FILES = ("*.pyc", "*.pyo", ".DS_Store", "Thumbs.db", "*.swp", "*~")

# What `pip install` leaves in a plugin's source tree (the serving stage installs it from there): skipped,
# the same set `hfrelease.serving.plugin.source_hash` ignores.
PLUGIN_LITTER_DIRS = ("__pycache__", "build", "dist", ".git")
PLUGIN_LITTER_SUFFIX = ".egg-info"



def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    lowered = name.lower()
    return any(fnmatch(lowered, pattern.lower()) for pattern in patterns)


def is_secret_name(name: str) -> bool:
    return _matches(name, SECRETS)


def is_pickle(name: str) -> bool:
    suffixes = PurePosixPath(name.lower()).suffixes
    return any(suffix in PICKLE_SUFFIXES for suffix in suffixes)


def is_cache_file(name: str) -> bool:
    return _matches(name, CACHE_FILES)


def is_model_file(relpath: str, *, trust_remote_code: bool) -> bool:
    """A file a checkpoint directory holds for the model to load: weights, config, tokenizer, recipe."""
    name = PurePosixPath(relpath).name
    if name.endswith(".safetensors"):
        return True
    top_level = "/" not in relpath
    if top_level and _matches(name, MODEL_FILES):
        return True
    return top_level and trust_remote_code and fnmatch(name, REMOTE_CODE)


def role_of(repo_path: str) -> str:
    """What a file is, in the plan's words (weights, config, tokenizer, card...)."""
    name = PurePosixPath(repo_path).name
    first = repo_path.split("/", 1)[0]
    roles = {"plots": "plot", ".eval_results": "eval-results", "vllm_plugin": "plugin", "ledger": "ledger-record",
             "every_eval_ever": "eval-record", "prompts": "prompts", "gates": "gate-code"}
    if first in roles and "/" in repo_path:
        return roles[first]
    if name.endswith(".safetensors"):
        return "weights"
    if name == "generation_config.json":
        return "generation-config"
    if name == "config.json" or name.endswith(".safetensors.index.json"):
        return "config"
    if name.startswith(("tokenizer", "special_tokens", "added_tokens", "vocab", "merges", "chat_template")):
        return "tokenizer"
    named = {"README.md": "card", "CITATION.cff": "citation", "MANIFEST": "manifest", "recipe.yaml": "recipe"}
    return named.get(name, "declared")



def declared_repo_path(relative: str, real: Path, checkpoint: Path | None) -> str:
    """Where a file the manifest names (`files`, a quant's `recipe`) lands in the repo: relative to the
    checkpoint when it is inside it, else by its name; speculators' per-epoch files (<epoch>/val_metrics.json)
    keep their epoch directory, as by name alone every epoch's would claim one repo path."""
    if checkpoint is not None and real.is_relative_to(checkpoint):
        return real.relative_to(checkpoint).as_posix()
    name = Path(relative).name
    return f"{Path(relative).parent.name}/{name}" if Path(relative).parent.name.isdigit() else name


def shipped_path(manifest: Manifest, artifact: Artifact, relative: str) -> str:
    """The path in the artifact's published repo of a file the manifest names by its place in the family (a
    card cites `recipe.yaml`, not the build path `checkpoints/fp8-dynamic/recipe.yaml`)."""
    source = artifact.source.path
    checkpoint = manifest.resolve(source).resolve() if source is not None else None
    return declared_repo_path(relative, (manifest.root / relative).resolve(), checkpoint)


PROMPTS_DIR = "prompts"


def prompt_repo_path(path: str) -> str:
    """Where a workload's (or the fidelity gate's) prompt file lives in a published repo: prompts/<name>,
    so a reader can re-run a card's speed figure with the file it names (issue 25, part 6)."""
    return f"{PROMPTS_DIR}/{PurePosixPath(path).name}"


GATES_DIR = "gates"
PYTHONS = ("python", "python3")


def gate_command_files(manifest: Manifest, gate: Gate) -> dict[int, str]:
    """The words of a custom gate's command that name files, by index -> their path in a published repo: the
    program (`gates/<name>`) and every input file (`prompts/<name>`, as the speed prompts ship), so the card's
    re-run command names files a reader has (issue 25: it printed `--prompts ../../build/demo/...`). A word
    names a file when one is there, relative to the manifest, or when it leaves the family's folder (`../`,
    an absolute path): the card must not print that path whether or not this machine has it."""
    if gate.command is None:
        return {}
    program = 1 if gate.command[0] in PYTHONS else 0
    files = {}
    for index, word in enumerate(gate.command[program:], program):
        if word.startswith("-") or not (manifest.resolve(word).is_file() or leaves_repo(word)):
            continue
        files[index] = f"{GATES_DIR if index == program else PROMPTS_DIR}/{PurePosixPath(word).name}"
    return files


def leaves_repo(word: str) -> bool:
    """Whether a path names a place outside the folder it is read from: a `..` part, a home or absolute path."""
    return word.startswith(("/", "~")) or ".." in PurePosixPath(word).parts


def shipped_prompts(manifest: Manifest) -> dict[str, tuple[Path, str]]:
    """The prompt files every published repo of the family ships: repo path -> (file, where the manifest
    names it); the workloads' and the fidelity gates' prompts, and the files custom gates' commands name
    (`gate_command_files`), each file once."""
    shipped: dict[str, tuple[Path, str]] = {}
    named = [(w.prompts, f"workload[{i}].prompts") for i, w in enumerate(manifest.workload)]
    named += [(g.fidelity, f"gate[{i}].fidelity") for i, g in enumerate(manifest.gate) if g.fidelity]
    for relative, where in named:
        shipped.setdefault(prompt_repo_path(relative), (manifest.root / relative, where))
    for i, gate in enumerate(manifest.gate):
        for index, repo_path in gate_command_files(manifest, gate).items():
            assert gate.command is not None
            shipped.setdefault(repo_path, (manifest.resolve(gate.command[index]), f"gate[{i}].command[{index}]"))
    return shipped
