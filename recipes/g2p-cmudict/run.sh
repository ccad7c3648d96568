#!/usr/bin/env bash
# Trains and evaluates every configuration of the recipe, two at a time (one thread each),
# and prints the results table of README.md. Run from the repository root after
# `make demo` (or after preparing the data and building build/bin/mona):
#
#   bash recipes/g2p-cmudict/run.sh [CONFIG_NAME ...]     # default: all eight
#
# For each model: test PER and WER with greedy hard online decoding (the online path),
# with beam 8 (rank 8, prune margin 3; on an evenly spaced 2000-word subset of the test
# split, to bound the time), and with greedy decoding over the soft expected alignment
# (the hard-vs-expected gap); words/s of greedy and beam decoding; training minutes/steps.
# A configuration whose training or an evaluation failed shows "-" there, and the script
# then exits with 1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/two-at-a-time.sh"
BUILD=${BUILD:-build}
mona="$BUILD/bin/mona"
test_tsv=data/cache/g2p-cmudict/test.tsv
configs=("$@")
[[ ${#configs[@]} -gt 0 ]] || configs=(soft_bi soft_uni monotonic mocha_w2 mocha_w4 matcha sagmm_tr gmm)

train_one() {
  local name=$1
  # --overwrite: running the recipe again retrains from scratch (mona refuses to replace a run otherwise)
  "$mona" train "recipes/g2p-cmudict/configs/$name.yaml" --overwrite > "runs/g2p/$name.train.txt" 2> "runs/g2p/$name.progress.txt"
}
# result FILE ARGS...: `mona eval ARGS --json` into FILE through a temporary name, so that a
# failed evaluation leaves no FILE (the table then shows "-", not a score). One thread each:
# two evaluations run side by side, one per core (eval's default of two threads each would
# put four threads on the two cores).
result() {
  local file=$1
  shift
  rm -f "$file"
  if "$mona" --threads 1 eval "$@" --json > "$file.part"; then mv "$file.part" "$file"; else rm -f "$file.part"; return 1; fi
}
eval_one() {
  local name=$1 ckpt="runs/g2p/$1/best.ckpt"
  # A training that failed may leave an earlier run's checkpoint: that is not scored.
  if ! grep -q '^trained ' "runs/g2p/$name.train.txt" 2>/dev/null; then
    rm -f "runs/g2p/$name.greedy.json" "runs/g2p/$name.beam8.json" "runs/g2p/$name.expected.json"
    echo "run.sh: $name: training failed (runs/g2p/$name.progress.txt says why), not evaluated" >&2
    return 1
  fi
  result "runs/g2p/$name.greedy.json" "$ckpt" "$test_tsv" --beam 0
  result "runs/g2p/$name.beam8.json" "$ckpt" "$test_tsv" --beam 8 --limit 2000
  result "runs/g2p/$name.expected.json" "$ckpt" "$test_tsv" --beam 0 --expected
}
mkdir -p runs/g2p
two_at_a_time train_one "${configs[@]}"
two_at_a_time eval_one "${configs[@]}"

# A field of an evaluation's JSON, or nothing when the evaluation left no file.
field() { [[ -s $1 ]] && sed -n "s/.*\"$2\": \([0-9.eE+-]*\).*/\1/p" "$1" || true; }
printf '| config | test PER | test WER | PER beam 8 | WER beam 8 | PER expected | WER expected | words/s greedy | words/s beam 8 | training |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for name in "${configs[@]}"; do
  g=runs/g2p/$name.greedy.json; b=runs/g2p/$name.beam8.json; e=runs/g2p/$name.expected.json
  steps=$(sed -n 's/^trained \([0-9]*\) steps in \([0-9.]*\) min.*/\1 steps, \2 min/p' "runs/g2p/$name.train.txt")
  awk -v n="$name" -v gp="$(field $g token_error_rate)" -v gw="$(field $g sequence_error_rate)" \
      -v bp="$(field $b token_error_rate)" -v bw="$(field $b sequence_error_rate)" \
      -v ep="$(field $e token_error_rate)" -v ew="$(field $e sequence_error_rate)" \
      -v gs="$(field $g inputs_per_second)" -v bs="$(field $b inputs_per_second)" -v st="$steps" \
      'function pct(x) { return x == "" ? "-" : sprintf("%.2f%%", 100 * x) }
       function num(x) { return x == "" ? "-" : sprintf("%.0f", x) }
       BEGIN { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n, pct(gp), pct(gw), pct(bp), pct(bw),
               pct(ep), pct(ew), num(gs), num(bs), (st == "" ? "-" : st) }'
done
# Exit status 1 when a configuration has a result missing (a failed training or evaluation).
for name in "${configs[@]}"; do
  for d in greedy beam8 expected; do
    if [[ ! -s runs/g2p/$name.$d.json ]]; then
      echo "run.sh: $name has no $d result (runs/g2p/$name.progress.txt)" >&2
      exit 1
    fi
  done
done
