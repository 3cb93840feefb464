#!/usr/bin/env bash
# Here, not on the device: pack LanceDB for the device machine, which has none and takes at most
# 64 MiB a call. The two native libraries (185 and 225 MB) travel xz-compressed, one a call:
#   .devwheels/part1   lance's library (pylance), xz, and its Python files
#   .devwheels/part2   lancedb's library, xz, its Python files, and the small wheels both need
# Then, on one warm machine, calls close together (it goes back after 30 s idle):
#   run  carry [".devwheels/part1"]                      benchmarks/gpu/run.sh install
#   run  carry [".devwheels/part2"]                      benchmarks/gpu/run.sh install
#   run  carry [".devcarry/model"]                       benchmarks/gpu/run.sh c
# "install" unpacks into .devsite/ (ignored, so it stays on the machine between calls).
# .devwheels/ and .devsite/ must be in .git/info/exclude. Takes ~10 minutes here (xz -9).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.devwheels
work=$(mktemp -d)
rm -rf "$out" && mkdir -p "$out/part1" "$out/part2"
pip_download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$work" "$@"
}
pip_download lancedb==0.40.0 pylance==14.0.2 lance-namespace==0.13.0 lance-namespace-urllib3-client==0.13.0 \
  deprecation==2.1.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
split_wheel() {  # wheel, package folder, library, part
  local tree="$work/tree-$2"
  mkdir -p "$tree" && (cd "$tree" && python3 -m zipfile -e "$1" .)
  xz -9 -T2 -c "$tree/$2/$3" > "$out/$4/$3.xz"
  rm "$tree/$2/$3"
  tar -C "$tree" -czf "$out/$4/$2-python.tar.gz" .
}
split_wheel "$work"/pylance-*.whl lance lance.abi3.so part1
split_wheel "$work"/lancedb-*.whl lancedb _lancedb.abi3.so part2
for wheel in "$work"/*.whl; do
  case "$(basename "$wheel")" in pylance-*|lancedb-*) ;; *) cp "$wheel" "$out/part2/" ;; esac
done
rm -rf "$work"
du -sh "$out"/part1 "$out"/part2
