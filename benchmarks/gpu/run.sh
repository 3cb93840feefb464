#!/usr/bin/env bash
# On the device machine: GPU measurements (part a), then LongMemEval vectors (part b).
# Needs .devcarry/ (fp16 model, LongMemEval file, a CPU reference chunk) carried along.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python3 benchmarks/gpu/measure.py "${1:-a}" "${OUT:-/tmp/out}"
