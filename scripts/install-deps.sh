#!/usr/bin/env bash
# Installs the Debian 12 packages ubfuse needs. Idempotent and quick when all are present.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git
  libhwy-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # dnnl-config.cmake calls find_package(OpenCL): its headers and loader are only a Recommends
  # of libdnnl-dev, which --no-install-recommends skips.
  libdnnl-dev ocl-icd-opencl-dev libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  graphviz python3-torch python3-numpy python3-onnx
  # The Python package (python/): pybind11 does not pull in the headers of the Python it builds for.
  pybind11-dev python3-dev python3-pytest
  # Debian's torch runs f32 GEMM through libblas.so.3, which without OpenBLAS is the netlib
  # reference BLAS (measured ~100x slower): the PyTorch baseline of bench/decoder_bench.py.
  libopenblas0-pthread
  clang-14 libfuzzer-14-dev libclang-rt-14-dev
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
