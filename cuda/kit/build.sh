#!/usr/bin/env bash
# build.sh DIR builds the GPU validation kit into DIR (make gpu-kit: bin/gpu-kit) on a machine
# without a GPU: a gpu-tagged audit binary and test binary of ./cuda for the GPU node, the
# default-build test binary of ./cuda/hostshim (the shim, and the CPU benchmarks and summary
# for the --shim mode) with the kernel sources, and run.sh. The gpu builds need the CUDA 11.8
# or 12.x headers and libcuda.so (or its stub) to link against, as .ci/gpu-checks sets up;
# nothing links libcublas. The folder must stay under 64 MiB (checked here; 59 MiB before W2
# and the graphs were added, about 54 MiB since the shim's binary serves --shim mode alone).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bin/gpu-kit}
GO=${GO:-go}
limit=$((64 * 1024 * 1024))

rm -rf "$out"
mkdir -p "$out/src/kernels" "$out/src/cuda/hostshim/cxx"
# -s -w: no symbol table or DWARF (the kit ships binaries, not a debugger's view of them).
flags=(-trimpath -ldflags=-s\ -w)
"$GO" build -tags gpu "${flags[@]}" -o "$out/audit" ./cmd/audit
"$GO" test -c -tags gpu "${flags[@]}" -o "$out/cuda-gpu.test" ./cuda
"$GO" test -c "${flags[@]}" -o "$out/shim.test" ./cuda/hostshim
cp kernels/*.cu kernels/*.cuh kernels/*.ptx "$out/src/kernels/"
cp cuda/hostshim/cxx/* "$out/src/cuda/hostshim/cxx/"
cp cuda/kit/run.sh cuda/kit/steps.sh cuda/kit/README.md cuda/kit/cli-gpu.yaml "$out/"
chmod +x "$out/run.sh"
git rev-parse HEAD > "$out/COMMIT" 2>/dev/null || echo unknown > "$out/COMMIT"

size=$(du -sb "$out" | cut -f1)
echo "gpu-kit: $out is $size bytes ($((size / 1024 / 1024)) MiB); limit $limit"
if [ "$size" -ge "$limit" ]; then
  echo "gpu-kit: $out is over 64 MiB" >&2
  exit 1
fi
