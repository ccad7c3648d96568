#!/usr/bin/env bash
# Prints the OpenBLAS kernel family (an OPENBLAS_CORETYPE value) that `make test` forces for
# its second run of the LibTorch suites: a family other than the one OpenBLAS picks on this
# CPU, that this CPU can run, and that rounds differently (another vector width or no FMA).
# A test that holds only for one family then fails on the developer's own machine too.
#
#   scripts/second-blas-core.sh PROGRAM    # PROGRAM: any binary linked to LibTorch/OpenBLAS
#
# The family OpenBLAS picks is what it reports with OPENBLAS_VERBOSE=2 ("Core: SkylakeX").
set -euo pipefail
program=${1:?usage: second-blas-core.sh PROGRAM (a binary that loads OpenBLAS)}
[[ -x "$program" ]] || { echo "second-blas-core.sh: $program: not an executable" >&2; exit 1; }

picked=$(OPENBLAS_VERBOSE=2 "$program" --help 2>&1 | sed -n 's/^Core: *//p' | head -n1 || true)
has_avx512=$(grep -qw avx512f /proc/cpuinfo && echo yes || echo no)
has_avx2=$(grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && echo yes || echo no)
has_avx=$(grep -qw avx /proc/cpuinfo && echo yes || echo no)

# Where OpenBLAS falls back to Prescott on a CPU it does not know, mona's programs run the
# family of the CPU's vector units instead (nn::use_best_blas_kernels, src/nn/threads.cc:
# AVX-512 F/BW/DQ/VL -> SkylakeX, AVX2 + FMA -> Haswell): that is the family the first run
# used, so the second must differ from it, not from Prescott.
if [[ $picked == Prescott ]]; then
  if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
     grep -qw avx512vl /proc/cpuinfo; then
    picked=SkylakeX
  elif [[ $has_avx2 == yes ]]; then
    picked=Haswell
  fi
fi

case "$picked" in
  SkylakeX|Cooperlake|SapphireRapids)           second=Haswell ;;      # AVX-512 -> AVX2 + FMA
  Haswell|Zen)
    if [[ $has_avx512 == yes ]]; then second=SkylakeX; else second=Sandybridge; fi ;;  # -> AVX-512 / AVX without FMA
  Sandybridge|Bulldozer|Piledriver|Steamroller|Excavator) second=Nehalem ;;     # AVX -> SSE
  Prescott)  # no AVX2: a family without the SSE3 kernels' rounding where the CPU has AVX
    if [[ $has_avx == yes ]]; then second=Sandybridge; else second=Nehalem; fi ;;
  "")
    echo "second-blas-core.sh: $program did not report an OpenBLAS core (is libopenblas0-pthread the BLAS?)" >&2
    exit 1 ;;
  *)
    if [[ $has_avx2 == yes ]]; then second=Haswell; else second=Prescott; fi ;;
esac
echo "$second"
