# Sourced by scripts/demo and scripts/test: nothing is ever fetched from the Hugging Face Hub at run time.
export HF_HUB_OFFLINE=1
export HF_DATASETS_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export HF_HUB_DISABLE_TELEMETRY=1
export HF_HUB_DISABLE_XET=1
export VLLM_TARGET_DEVICE="${VLLM_TARGET_DEVICE:-cpu}"
export VLLM_NO_USAGE_STATS=1
export DO_NOT_TRACK=1
