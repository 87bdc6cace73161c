#!/usr/bin/env bash
# Installs the Debian packages pypto_pro needs, only when some are missing (a no-op otherwise).
# Nothing here comes from PyPI: Python packages are Debian's, used by /usr/bin/python3.
set -euo pipefail

packages=(g++ cmake ninja-build python3 python3-dev python3-numpy python3-torch libtorch-dev python3-pytest
          pybind11-dev libgtest-dev python3-venv python3-pip python3-setuptools gdb
          python3-pytest-xdist)
if [[ "${PYPTO_PRO_BENCH_DEPS:-0}" == 1 ]]; then
  # OpenBLAS: the benchmark's numpy/torch fp32 peers at their best (benchmarks/bench.py puts it in
  # front for its own processes); the tests keep the BLAS they had (see below).
  packages+=(python3-numba libbenchmark-dev libopenblas0-pthread)
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$pkg")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "pypto_pro: installing missing system packages: ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "pypto_pro: please install them (as root): apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Installing OpenBLAS would switch the system's libblas.so.3 / liblapack.so.3 to it: the tests'
# numpy and torch must keep the BLAS they had, so the alternatives are set back afterwards.
arch_triplet=x86_64-linux-gnu
blas_before=$(update-alternatives --query "libblas.so.3-$arch_triplet" 2>/dev/null | sed -n 's/^Value: //p' || true)
lapack_before=$(update-alternatives --query "liblapack.so.3-$arch_triplet" 2>/dev/null | sed -n 's/^Value: //p' || true)
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [[ -n "$blas_before" ]]; then "${sudo[@]}" update-alternatives --set "libblas.so.3-$arch_triplet" "$blas_before"; fi
if [[ -n "$lapack_before" ]]; then "${sudo[@]}" update-alternatives --set "liblapack.so.3-$arch_triplet" "$lapack_before"; fi
