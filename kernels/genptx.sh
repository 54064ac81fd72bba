#!/bin/sh
# genptx.sh NAME compiles NAME.cu to NAME.ptx for the virtual architecture compute_70 (run by
# go generate ./kernels). It refuses a CUDA toolkit of major version 13 or later: nvcc 13 can
# no longer generate compute_70 PTX, and the committed PTX must stay compute_70 so that every
# driver from CUDA 11.8 on (and GPUs from Volta on) can load it; the CUDA 13 driver still
# JIT-compiles compute_70 PTX. Use the CUDA 11.8 or 12.x nvcc.
set -eu
name=$1
nvcc=${NVCC:-nvcc}
if ! command -v "$nvcc" >/dev/null 2>&1; then
  echo "genptx: $nvcc not found: regenerating the PTX needs the CUDA 11.8 or 12.x toolkit" >&2
  exit 1
fi
release=$("$nvcc" --version | sed -n 's/.*release \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1.\2/p' | head -1)
major=${release%%.*}
if [ -z "$major" ]; then
  echo "genptx: cannot read the CUDA release from '$nvcc --version'" >&2
  exit 1
fi
if [ "$major" -ge 13 ]; then
  echo "genptx: $nvcc is CUDA $release; CUDA 13 and later cannot generate compute_70 PTX." >&2
  echo "genptx: regenerate with the CUDA 11.8 or 12.x nvcc (NVCC=/path/to/nvcc go generate ./kernels)." >&2
  exit 1
fi
exec "$nvcc" -ptx -arch=compute_70 -fmad=false -O3 -o "$name.ptx" "$name.cu"
