#!/usr/bin/env bash
# On the device machine:
#   run.sh a        GPU measurements (raw encode, a pipeline beside esfis, search; measure.py)
#   run.sh b        LongMemEval vectors (measure.py)
#   run.sh install  unpack what pack.sh made (a carried .devwheels/part1 or part2) into .devsite/
#   run.sh c        esfis's own import end to end, model on the GPU (import_e2e.py); needs both
#                   parts installed and .devcarry/model
# a and b need .devcarry/ (fp16 model, LongMemEval file, a CPU reference chunk) carried along.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
part=${1:-a}
case "$part" in
  install)
    mkdir -p .devsite
    for dir in .devwheels/part1 .devwheels/part2; do
      [ -d "$dir" ] || continue
      for tarball in "$dir"/*-python.tar.gz; do tar -C .devsite -xzf "$tarball"; done
      python3 - "$dir" <<'EOF'
import lzma, shutil, sys
from pathlib import Path
PACKAGE = {"lance.abi3.so": "lance", "_lancedb.abi3.so": "lancedb"}
for packed in Path(sys.argv[1]).glob("*.so.xz"):
    target = Path(".devsite") / PACKAGE[packed.stem] / packed.stem
    with lzma.open(packed) as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    print("unpacked", target, target.stat().st_size)
EOF
      if ls "$dir"/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target .devsite "$dir"/*.whl
      fi
    done
    ls .devsite
    ;;
  c)
    PYTHONPATH=$PWD/.devsite python3 benchmarks/gpu/import_e2e.py "${OUT:-/tmp/out}" "${2:-300000}"
    ;;
  *)
    python3 benchmarks/gpu/measure.py "$part" "${OUT:-/tmp/out}"
    ;;
esac
