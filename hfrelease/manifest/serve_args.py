"""Spelling-level checks of `vllm serve` arguments and environment in a manifest (no vLLM needed).

These run on every manifest load, on any machine: a GitHub-hosted runner with only hfrelease installed
checks a manifest too. They are deliberately conservative: vLLM's parser is argparse, which accepts any
unambiguous prefix of an option (`--trust-remote` is `--trust-remote-code`, `--hos 0.0.0.0` sets the host),
`_` for `-` (`--trust_remote_code`), `--opt=value`, dotted JSON keys (`--speculative-config.model x`) and
`--config FILE`, so an argument is refused whenever its option name, spelt any of those ways, could be an
option hfrelease owns. Where vLLM is installed, `hfrelease.serving.guard` then parses the exact command
with vLLM's own parser and inspects the resulting namespace, which is the authority.

What loads code is listed here, in one place, each with why: the `vllm serve` options that import, execute or
read files the manifest does not declare (`CODE_OPTIONS`, the keys of JSON options in `CODE_KEYS`, and any other
option or key whose name says it names a module, class, plugin, file or directory: `CODE_WORDS`), and the
environment variables that make the server, or a program it starts, load code (`CODE_ENV`, `CODE_ENV_PREFIXES`).
A family's own code reaches vLLM only as its plugin (`serve.plugin`), a package vLLM loads as a general plugin,
which can register tool and reasoning parsers, logits processors and models itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from hfrelease.redact import token_shaped

# vLLM's option -> why a manifest must not pass it in `args` (the manifest key to use instead).
OWNED_OPTIONS: Mapping[str, str] = {
    "--host": "hfrelease serves on 127.0.0.1 only",
    "--port": "hfrelease chooses a free port",
    "--uds": "hfrelease talks to the server over TCP on 127.0.0.1",
    "--trust-remote-code": "use trust_remote_code = true",
    "--no-trust-remote-code": "use trust_remote_code = false",
    "--config": "a config file hides arguments from the guard: put them in the manifest",
    "--api-key": "never pass credentials as arguments",
    "--hf-token": "never pass credentials as arguments",
    "--model": "the artifact's source names the model",
    "--served-model-name": "hfrelease serves each artifact under its repo id",
    "--speculative-config": "declare it in [[speculative]] and name it in a workload",
    "--spec-method": "declare it in [[speculative]] and name it in a workload",
    "--spec-model": "declare it in [[speculative]] and name it in a workload",
    "--spec-tokens": "declare it in [[speculative]] and name it in a workload",
    "--reasoning-parser": "use reasoning_parser",
    "--tool-call-parser": "use tool_call_parser",
    "--max-model-len": "use max_model_len",
    "--kv-cache-dtype": "use kv_cache_dtype",
    "--headless": "hfrelease needs the API server",
}
# Single-dash aliases of owned options in vLLM 0.32 (-sc is --speculative-config; -h prints help and exits).
OWNED_SHORT: Mapping[str, str] = {
    "-sc": OWNED_OPTIONS["--speculative-config"],
    "-h": "help exits instead of serving",
}

_USE_PLUGIN = "a family's own code reaches vLLM only as its plugin (serve.plugin)"
_UNDECLARED = "hfrelease serves only the files the manifest declares"
# vLLM options that import or run code, or read (or write) files the manifest does not declare, refused in
# `args` whatever their value (read from vLLM 0.32's source: where each value ends up).
CODE_OPTIONS: Mapping[str, str] = {
    "--tool-parser-plugin": f"vLLM imports this Python file into the server: {_USE_PLUGIN}",
    "--reasoning-parser-plugin": f"vLLM imports this Python file into the server: {_USE_PLUGIN}",
    "--io-processor-plugin": f"activates an installed package's IO processor (its code) by name: {_USE_PLUGIN}",
    "--middleware": f"vLLM imports each named object and runs it on every request: {_USE_PLUGIN}",
    "--logits-processors": f"vLLM imports each qualified class name into the engine: {_USE_PLUGIN}",
    "--worker-cls": f"vLLM imports this qualified class name into every worker: {_USE_PLUGIN}",
    "--worker-extension-cls": f"vLLM imports this qualified class name into every worker: {_USE_PLUGIN}",
    "--scheduler-cls": f"vLLM imports this qualified class name as the scheduler: {_USE_PLUGIN}",
    "--model-class-overrides": f"registers a module:class of any package as the model's implementation: {_USE_PLUGIN}",
    "--log-config-file": "vLLM hands the file to logging.config.dictConfig, which calls any callable it names",
    "--tool-server": "connects the server to tool servers ('demo' starts a Python tool that runs model-written code)",
    "--allowed-local-media-path": "lets any request read every file under this directory",
    "--tokenizer": f"loads a tokenizer from another path or repo than the artifact: {_UNDECLARED}",
    "--hf-config-path": f"loads the model config from another path or repo than the artifact: {_UNDECLARED}",
    "--lora-modules": f"loads LoRA adapters from any path or repo: {_UNDECLARED}",
    "--download-dir": "downloads (and loads back) weights in any directory",
    "--mm-encoder-fp8-scale-path": f"reads scales from any file: {_UNDECLARED}",
    "--mm-encoder-fp8-scale-save-path": "writes to any file",
    "--ssl-keyfile": "reads a key file: hfrelease talks plain HTTP to its server on 127.0.0.1",
    "--ssl-certfile": "reads a certificate file: hfrelease talks plain HTTP to its server on 127.0.0.1",
    "--ssl-ca-certs": "reads a CA file: hfrelease talks plain HTTP to its server on 127.0.0.1",
    "--kv-transfer-config": "its connector settings import modules named anywhere in them (kv_connector_module_path, "
                            "spec_module_path, policy class names)",
    "--ec-transfer-config": "its connector settings import a module named in them (ec_connector_module_path)",
    "--ec-manager-config": "vLLM imports the encoder cache manager class it names",
    "--weight-transfer-config": "receives weights from another process instead of the artifact's files",
    "--kv-events-config": "publishes KV-cache events on a ZMQ endpoint (by default on every interface)",
    "--model-loader-extra-config": "hands the weight loader settings that name files and URIs to load from",
    "--additional-config": "hands platform plugins settings vLLM does not check",
}
# Options refused unless their value is one of these (vLLM's own implementations, the artifact's own files).
ALLOWED_VALUES: Mapping[str, tuple[frozenset[object], str]] = {
    "--model-impl": (frozenset({"auto", "vllm"}),
                     "'transformers' (and 'terratorch') run modeling code the checkpoint names (its auto_map)"),
    "--distributed-executor-backend": (frozenset({None, "mp", "uni"}),
                                       "any other value is a qualified class name vLLM imports, or Ray's cluster"),
    "--generation-config": (frozenset({"auto", "vllm"}),
                            f"any other value is a directory vLLM reads the generation config from: {_UNDECLARED}"),
    "--load-format": (frozenset({"auto", "hf", "safetensors", "pt", "fastsafetensors", "instanttensor", "mistral",
                                 "npcache", "sharded_state", "dummy"}),
                      "the other loaders read weights from elsewhere (tensorizer and Run:ai URIs, another process's "
                      "IPC cache, a ModelExpress server) or come from a plugin"),
}
# Keys of JSON options refused at any depth, beyond those CODE_WORDS and the owned options name.
CODE_KEYS: Mapping[str, Mapping[str, str]] = {
    "--compilation-config": {
        "backend": "a qualified name vLLM imports as the compile backend",
        "inductor_passes": "qualified names vLLM imports as compiler passes (while parsing the arguments)",
        "inductor_compile_config": "Inductor settings, among them the C++ compiler it runs",
    },
    "--hf-overrides": {"auto_map": "names the checkpoint's own modeling code (remote code)"},
}
# Words of an option's or a JSON key's name (split at '_' or '-') that say it names a module, class, plugin,
# file or directory: such an option or key that is in none of the tables here is refused too, so an option a
# later vLLM adds (`--foo-plugin`) is refused until someone reads what it does and lists it.
CODE_WORDS = frozenset({
    "plugin", "plugins", "module", "modules", "cls", "class", "qualname", "path", "paths", "file", "files", "dir",
    "dirs", "folder", "middleware", "processors", "impl",
})
# Options whose names hold a CODE_WORDS word but which load no code and read no file.
NOT_CODE: Mapping[str, str] = {
    "--root-path": "a URL prefix, not a file path",
    "--lora-target-modules": "names layers of the model, not Python modules",
    "--max-lora-cls-labels": "a number of classification labels",
    "--hf-overrides": "settings of the model config, judged key by key (CODE_KEYS)",
}
_TRUST_REMOTE_CODE = re.compile(r"trust.?remote.?code", re.I)


def _words(name: str) -> set[str]:
    return set(name.lower().strip("-").replace("-", "_").split("_"))


def code_option_reason(option: str, value: object = None) -> str | None:
    """Why `args` must not set vLLM's `option` (`--tool-parser-plugin`) to `value`, or None when they may."""
    if option in CODE_OPTIONS:
        return CODE_OPTIONS[option]
    if option in ALLOWED_VALUES:
        allowed, reason = ALLOWED_VALUES[option]
        return None if value in allowed else reason
    if option not in NOT_CODE and _words(option) & CODE_WORDS:
        return "its name says it names a module, class, plugin, file or directory, which hfrelease does not load"
    return None


def code_key_reason(option: str, key: str, owned: frozenset[str]) -> str | None:
    """Why a key of JSON option `option` (at any depth) must not be set from a manifest, or None."""
    if _TRUST_REMOTE_CODE.fullmatch(key):
        return OWNED_OPTIONS["--trust-remote-code"]
    if key in owned:
        return OWNED_OPTIONS.get("--" + key.replace("_", "-"), "hfrelease sets it")
    if key in CODE_KEYS.get(option, {}):
        return CODE_KEYS[option][key]
    if _words(key) & CODE_WORDS:
        return "its name says it names a module, class, plugin, file or directory, which hfrelease does not load"
    return None


_RUNS = "runs code the manifest does not declare"
# Environment variables that make the vLLM server, or a program it starts (compilers, shells, the loader), load
# code or read files the manifest does not declare, refused in `serve.env` (names compared in upper case). From
# vLLM 0.32's envs.py, Python's, glibc's and the compilers' documentation.
CODE_ENV: Mapping[str, str] = {
    "VLLM_LOGGING_CONFIG_PATH": "vLLM hands the file to logging.config.dictConfig, which calls any callable it names",
    "VLLM_PLUGINS": "chooses which installed vLLM plugins load: a family's own plugin is serve.plugin",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "lets vLLM's processes unpickle what they exchange (unpickling runs code)",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "lets any request load LoRA adapters (and resolver plugins fetch them)",
    "VLLM_LORA_RESOLVER_HF_REPO_LIST": "Hub repos LoRA adapters are downloaded from at request time",
    "VLLM_HUMMING_ONLINE_QUANT_CONFIG": "a JSON string or a file vLLM reads",
    "VLLM_HUMMING_INPUT_QUANT_CONFIG": "a JSON string or a file vLLM reads",
    "VLLM_ASSETS_CACHE": "a directory vLLM reads downloaded assets back from",
    "VLLM_MEDIA_CACHE": "a directory vLLM reads cached media back from",
    "HF_HUB_CACHE": "the Hub cache models and remote code are loaded from",
    "HUGGINGFACE_HUB_CACHE": "the Hub cache models and remote code are loaded from",
    "TRANSFORMERS_CACHE": "the Hub cache models and remote code are loaded from",
    "PYTHONPATH": "directories searched before the installed packages: any module can be replaced",
    "PYTHONHOME": "another Python standard library",
    "PYTHONSTARTUP": "a file Python runs when it starts interactively",
    "PYTHONUSERBASE": "a user site directory, whose .pth files Python runs at start",
    "PYTHONPYCACHEPREFIX": "a directory Python loads bytecode from instead of the sources'",
    "PYTHONBREAKPOINT": "a callable Python imports and calls at breakpoint()",
    "PYTHONWARNINGS": "warning filters, whose categories Python imports by module name",
    "PYTHONINSPECT": "drops into an interactive interpreter at exit",
    "PATH": f"chooses which executables run (compilers, ptxas, every command a shell runs): {_RUNS}",
    "BASH_ENV": f"a file every non-interactive bash runs first: {_RUNS}",
    "ENV": f"a file sh runs first: {_RUNS}",
    "CC": "the C compiler Triton and torch's Inductor run",
    "CXX": "the C++ compiler torch's Inductor runs",
    "OMP_TOOL": "loads OpenMP tool libraries (OMP_TOOL_LIBRARIES)",
    "GCONV_PATH": "glibc loads character-conversion modules from it",
}
# Prefixes of whole families of such variables.
CODE_ENV_PREFIXES: Mapping[str, str] = {
    "LD_": "the dynamic loader's settings: LD_PRELOAD, LD_LIBRARY_PATH and LD_AUDIT load libraries into every process",
    "DYLD_": "the macOS dynamic loader's settings: they load libraries into every process",
    "PYTHON": "Python reads it at start, and such variables name code to run or places to import from",
}
# Python settings that load nothing (kept working).
_PYTHON_SETTINGS = frozenset({
    "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONFAULTHANDLER", "PYTHONDONTWRITEBYTECODE",
    "PYTHONUTF8", "PYTHONOPTIMIZE", "PYTHONNODEBUGRANGES", "PYTHONTRACEMALLOC", "PYTHONMALLOC",
})
# Words of a variable's name that say it names a file, directory, library or module to load or write to
# (VLLM_NCCL_SO_PATH, VLLM_CACHE_ROOT, CUDA_HOME, TRITON_CACHE_DIR, HF_MODULES_CACHE, NCCL_NET_PLUGIN,
# OMP_TOOL_LIBRARIES): refused too, so a variable a later vLLM adds is refused until someone lists it.
CODE_ENV_WORDS = frozenset({
    "PATH", "PATHS", "DIR", "DIRS", "FILE", "FOLDER", "ROOT", "HOME", "PLUGIN", "PLUGINS", "MODULE", "MODULES",
    "CLS", "CLASS", "QUALNAME", "PRELOAD", "LIBRARY", "LIBRARIES", "SO",
})


def code_env_reason(name: str) -> str | None:
    """Why `serve.env` must not set `name` (it loads code or reads undeclared files), or None when it may."""
    upper = name.upper()
    if upper in CODE_ENV:
        return CODE_ENV[upper]
    if upper in _PYTHON_SETTINGS:
        return None
    prefix = next((p for p in CODE_ENV_PREFIXES if upper.startswith(p)), None)
    if prefix is not None:
        return CODE_ENV_PREFIXES[prefix]
    if set(upper.split("_")) & CODE_ENV_WORDS:
        return "its name says it names a file, directory, library or module, which the server would load from"
    return None


# Words of an environment variable's name that mean it holds a credential. Wider than what redaction hides
# (which must keep settings such as MAX_TOKENS visible in records): a manifest has no business holding any
# of these, so OPENAI_KEY, hf_tok or DB_PASS are refused too.
_SECRET_WORDS = frozenset({
    "KEY", "KEYS", "APIKEY", "TOK", "SECRET", "SECRETS", "PASS", "PASSWD", "PASSWORD", "PWD",
    "CRED", "CREDS", "CREDENTIAL", "CREDENTIALS", "AUTH", "PAT", "BEARER", "COOKIE",
})
# TOKEN only at the end of the name: vLLM has settings such as VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE and
# VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD, while HF_TOKEN, GITHUB_TOKEN and HFTOKEN end with it.
_SECRET_INFIX = re.compile(r"SECRET|PASSW|APIKEY|ACCESSKEY|CREDENTIAL|TOKEN$|_KEY$|^KEY_", re.I)
# vLLM settings whose names contain a secret-looking word but hold none (kept working).
_NOT_SECRET = frozenset({"TOKENIZERS_PARALLELISM", "VLLM_CPU_KVCACHE_SPACE"})


def option_name(arg: str) -> str | None:
    """The option an argument names as vLLM's parser normalises it (`--Trust_remote=1` -> `--trust-remote`),
    or None for a value."""
    if arg.startswith("--"):
        name = arg[2:].split("=", 1)[0].split(".", 1)[0]
        return "--" + name.replace("_", "-")
    if arg.startswith("-") and len(arg) > 1 and not arg[1].isdigit():
        return "-" + arg[1:].split("=", 1)[0]
    return None


def args_problems(args: Sequence[str]) -> list[str]:
    """Why some of `args` may not be passed to `vllm serve` from a manifest (empty when none)."""
    problems: list[str] = []
    for arg in args:
        name = option_name(arg)
        if name is None:
            continue
        if name == "--":
            problems.append("a bare '--' ends the options: vLLM would read what follows differently")
            continue
        if name.startswith("--"):
            # argparse takes any unambiguous prefix: '--hos' is '--host'.
            hits = [opt for opt in OWNED_OPTIONS if opt.startswith(name)]
        else:
            hits = [opt for opt in OWNED_SHORT if opt.startswith(name) or name.startswith(opt)]
        if hits:
            owned = hits[0]
            written = arg.split("=", 1)[0]
            spelt = "" if written == owned else f" (vLLM reads {written!r} as {owned})"
            reason = OWNED_OPTIONS.get(owned) or OWNED_SHORT[owned]
            problems.append(f"args must not contain {owned}{spelt}: {reason}")
            continue
        code = [opt for opt in CODE_OPTIONS if opt.startswith(name)] if name.startswith("--") else []
        if code:
            written = arg.split("=", 1)[0]
            spelt = "" if written == code[0] else f" (vLLM reads {written!r} as {code[0]})"
            problems.append(f"args must not contain {code[0]}{spelt}: {CODE_OPTIONS[code[0]]}")
    # A JSON option can carry trust_remote_code (`--hf-overrides '{"trust_remote_code": true}'`, or the dotted
    # `--hf-overrides.trust_remote_code`): refused in any argument that mentions it.
    if any(_TRUST_REMOTE_CODE.search(arg) and option_name(arg) not in OWNED_OPTIONS for arg in args):
        problems.append("args must not mention trust_remote_code (in a JSON option either): "
                        f"{OWNED_OPTIONS['--trust-remote-code']}")
    return problems


def secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential (case-insensitive)."""
    upper = name.upper()
    if upper in _NOT_SECRET:
        return False
    words = set(upper.split("_"))
    return bool(words & _SECRET_WORDS) or bool(_SECRET_INFIX.search(upper))


def env_name_problem(name: str) -> str | None:
    """Why `serve.env` must not set the variable `name`: it looks like a credential, or it runs code."""
    if secret_name(name):
        return "looks like a secret: never put credentials in the manifest; export them where hfrelease runs"
    reason = code_env_reason(name)
    return f"runs code or reads undeclared files ({reason}): serve.env holds settings only" if reason else None


def env_value_problem(value: str) -> str | None:
    """Why `serve.env` must not hold `value` (never echoed): it looks like a token."""
    if token_shaped(value):
        return "the value looks like a token: never put credentials in the manifest; export them where hfrelease runs"
    return None
