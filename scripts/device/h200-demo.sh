#!/usr/bin/env bash
# Runs on the lent H200 (the device tool's `run`, in the repository's root there), after the carried parts of
# build/device/carry/ have arrived (scripts/device/README.md): the demo family evaluated with vLLM 0.26.0 on
# the image's torch 2.11.0+cu130. Everything lands under build/device/ (ignored) and the ledger goes back
# through $OUT.
#
#   scripts/device/h200-demo.sh install          verify + reassemble the parts, pip install --target, smoke test
#   scripts/device/h200-demo.sh eval ARGS...     hfrelease eval ARGS on build/device/h200/model_cards/demo (or
#                                                $FAMILY there), then the ledger and the run logs packed into
#                                                $OUT as results-NAME.tar.gz, runs-NAME.tar.gz, eval-NAME.log
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
SITE="$ROOT/build/device/site"
WORK="$ROOT/build/device/h200"
OUT="${OUT:-$ROOT/build/device/out}"
mkdir -p "$OUT"

export PYTHONPATH="$ROOT:$SITE"
export PATH="$SITE/bin:$PATH"
export PYTHONUNBUFFERED=1
# Nothing is fetched (the machine reaches nothing anyway): the reference and the draft come from the carried
# Hugging Face cache, where build/device/h200 was pinned and filled on the machine that prepared the carry.
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_XET=1
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export HF_HUB_CACHE="$WORK/hf-cache"
export HFRELEASE_CACHE="$ROOT/build/device/cache"
# FlashInfer's sampler compiles its kernels with nvcc at first use: the plain PyTorch sampler for a first run.
export VLLM_USE_FLASHINFER_SAMPLER=0
# Every record names the wheel list the environment was installed from (hardware.lock / lock_sha256).
export HFRELEASE_LOCK="$ROOT/scripts/device/vllm-0.26.0-cu130.txt"

case "${1:-}" in
  install)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 scripts/device/carry.py install build/device/carry --target "$SITE" || exit $?
    python3 - <<'PY' 2>&1 | tee "$OUT/versions.txt"
import importlib.metadata as m, sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0))
for name in ("vllm", "transformers", "huggingface_hub", "tokenizers", "lm_eval", "numpy", "numba", "triton",
             "fastapi", "pydantic", "openai", "datasets", "fsspec", "aiohttp", "typing_extensions"):
    try:
        print(name, m.version(name), m.distribution(name).locate_file(""))
    except m.PackageNotFoundError:
        print(name, "MISSING")
import vllm.entrypoints.openai.api_server  # noqa: F401  the server's imports, without a GPU process
import vllm.benchmarks.serve  # noqa: F401
import lm_eval.models.openai_completions  # noqa: F401
from hfrelease.serving.guard import vllm_parser
print("serve guard parser:", "loaded" if vllm_parser() is not None else "NOT LOADED")
PY
    ;;
  eval)
    shift
    # The demo build's lm-eval task files name their data by absolute path (build/demo/tasks/*.yaml:
    # /work/main/build/demo/tasks/demo_arith.jsonl): the carried copy answers there too. Without it the first
    # run on the H200 stopped at "GateWorkerError: FileNotFoundError: Unable to find
    # '/work/main/build/demo/tasks/demo_arith.jsonl'".
    [[ -e "$ROOT/build/demo" ]] || ln -sfn device/h200/build/demo "$ROOT/build/demo"
    cd "$WORK"
    family="${FAMILY:-model_cards/demo}"
    name="$(basename "$family")"
    status=0
    timeout --signal=TERM --kill-after=20 "${EVAL_TIMEOUT:-520}" \
      python3 -m hfrelease eval "$family" --run-dir "$WORK/runs-$name" "$@" 2>&1 | tee "$OUT/eval-$name.log" \
      || status=$?
    echo "hfrelease eval exit status: $status" | tee -a "$OUT/eval-$name.log"
    tar -czf "$OUT/results-$name.tar.gz" -C "$WORK/$family" results
    tar -czf "$OUT/runs-$name.tar.gz" --exclude='*.safetensors' -C "$WORK" "runs-$name" 2>/dev/null || true
    exit "$status"
    ;;
  *)
    sed -n '2,9p' "$0" >&2
    exit 2
    ;;
esac
