#!/usr/bin/env bash
# deps.sh - installs the Debian 12 packages resdiag needs to build and test,
# if any is missing. Needs root (or sudo) only when something is missing.
# Waits up to 10 minutes for another apt or dpkg (unattended-upgrades on a
# fresh machine) to release the dpkg lock instead of failing at once.
set -euo pipefail

# libopenblas-dev, libdeflate-dev and valgrind: for the benchmark only
# (build/resdiag-bench's OpenBLAS peer, its libdeflate peer of zlib,
# scripts/bench-callgrind.sh); the build and the tests do without them.
# openmpi-bin and libopenmpi-dev: for the multi-rank tests (tinygpt-mpi
# under mpirun, tests/ranks); the build does without them.
# tmux: for the terminal test of `resdiag watch` (skipped without it).
# python3-pandas, python3-xarray, python3-h5netcdf: for the Python tests of
# Run.to_pandas/to_xarray and of xarray opening a run file (skipped
# without them); the library and the binding do without them.
packages=(gcc g++ meson ninja-build pkg-config libhdf5-dev zlib1g-dev hdf5-tools check python3-torch python3-numpy python3-h5py python3-pandas python3-xarray python3-h5netcdf libxml2-utils pandoc universal-ctags libopenblas-dev libdeflate-dev valgrind openmpi-bin libopenmpi-dev tmux)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null; then
    sudo=(sudo)
else
    echo "deps: run as root: apt-get install ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt_get=(apt-get -o DPkg::Lock::Timeout=600)
# -q: one line per package and no progress bars, readable in CI logs too.
"${sudo[@]}" "${apt_get[@]}" update -q
"${sudo[@]}" "${apt_get[@]}" install -y -q --no-install-recommends "${missing[@]}"
