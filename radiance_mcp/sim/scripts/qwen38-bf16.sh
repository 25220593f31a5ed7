#!/usr/bin/env bash
# The simulated campaign rig's launcher: one script, one mode per function.
#
#   qwen38-bf16.sh MODE [--dry-run]
#
# --dry-run prints the engine's argv, one argument per line, and starts nothing.
# The shape (seats, step, host pool, headroom, pair) lives in qwen38-bf16.env beside this file.
set -euo pipefail

rig_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=/dev/null
source "$rig_dir/qwen38-bf16.env"

step="$QWEN38_BF16_MAX_BATCHED_TOKENS"

run_proven() {
  # The shape as the env file states it: the step the rig booted with.
  :
}

run_wide() {
  # A wider step is free throughput, so this mode takes its own.
  step=65536
}

mode="${1:-}"
if ! declare -F "run_${mode}" >/dev/null; then
  echo "usage: ${0##*/} {proven|wide} [--dry-run]" >&2
  exit 64
fi
"run_${mode}"

argv=(
  radiance serve
  --max-model-len "$QWEN38_BF16_MAX_MODEL_LEN"
  --max-num-seqs "$QWEN38_BF16_MAX_SEQS"
  --max-num-batched-tokens "$step"
  --host-pool-mib "$QWEN38_BF16_HOST_POOL_MIB"
  --gpu-headroom-mib "$QWEN38_BF16_GPU_HEADROOM_MIB"
  --vram-weights-mib "$QWEN38_BF16_VRAM_WEIGHTS_MIB"
  --vram-kv-mib "$QWEN38_BF16_VRAM_KV_MIB"
  --kv-cache-dtype "$QWEN38_BF16_KV_CACHE_DTYPE"
  --tp "$QWEN38_BF16_TP"
)

if [[ "${2:-}" == --dry-run ]]; then
  printf '%s\n' "${argv[@]}"
  exit 0
fi
exec "${argv[@]}"
