#!/usr/bin/env bash
# The spoken-commands recipe (README.md): makes the corpus, trains the given configurations
# two at a time (one thread each) and evaluates each on every set, greedy hard online
# decoding and beam 4 (003's beam), writing runs/spoken-commands/<name>.<set>.<decoding>.json
# and printing the WER table. Run from the repository root after building (make build):
#
#   bash recipes/spoken-commands/run.sh [CONFIG_NAME ...]     # default: every configs/*.yaml
#
# Environment: BUILD (default build), CORPUS_ARGS (extra mona-make-spoken-commands flags).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/two-at-a-time.sh"
BUILD=${BUILD:-build}
mona="$BUILD/bin/mona"
data=data/cache/spoken-commands
out=runs/spoken-commands
sets=(dev test-3 test-7 test-10 test-15 test-20 test-long real)
configs=("$@")
if [[ ${#configs[@]} -eq 0 ]]; then
  for f in recipes/spoken-commands/configs/*.yaml; do configs+=("$(basename "$f" .yaml)"); done
fi

# 20,000 training utterances (about 31 hours of audio): README.md says why.
"$BUILD/bin/mona-make-spoken-commands" --words recipes/spoken-commands/words.txt --out-dir "$data" \
  --train 20000 --dev 500 --test 500 --long 50 ${CORPUS_ARGS:-}

train_one() {
  "$mona" train "recipes/spoken-commands/configs/$1.yaml" --overwrite > "$out/$1.train.txt" 2> "$out/$1.progress.txt"
}
eval_one() {
  local name=$1 ckpt="$out/$1/best.ckpt"
  for set in "${sets[@]}"; do
    "$mona" eval "$ckpt" "$data/$set.tsv" --beam 0 --json > "$out/$name.$set.greedy.json"
    "$mona" eval "$ckpt" "$data/$set.tsv" --beam 4 --json > "$out/$name.$set.beam4.json"
  done
}
mkdir -p "$out"
two_at_a_time train_one "${configs[@]}"
two_at_a_time eval_one "${configs[@]}"

# A table's header: | model | $1 | one column per set |
header() {
  printf '| model | %s |' "$1"
  for set in "${sets[@]}"; do printf ' %s |' "$set"; done
  printf '\n| --- | --- |'
  for set in "${sets[@]}"; do printf ' --- |'; done
  printf '\n'
}
wer() { sed -n 's/.*"token_error_rate": \([0-9.eE+-]*\).*/\1/p' "$1" | awk '{ printf "%.2f", 100 * $1 }'; }
header decoding
for name in "${configs[@]}"; do
  for d in greedy beam4; do
    printf '| %s | %s |' "$name" "$d"
    for set in "${sets[@]}"; do printf ' %s |' "$(wer "$out/$name.$set.$d.json")"; done
    printf '\n'
  done
done

# Streaming latency of greedy online decoding: the emission delay after each recognised
# word's end in the audio (mona eval reads <set>.words.tsv beside the manifest), mean / 90th
# percentile in ms.
field() { sed -n "s/.*\"$2\": \([0-9.eE+-]*\).*/\1/p" "$1" | awk '{ printf "%.0f", $1 }'; }
printf '\n'
header 'emission delay (ms, mean / p90)'
for name in "${configs[@]}"; do
  printf '| %s | greedy |' "$name"
  for set in "${sets[@]}"; do
    f="$out/$name.$set.greedy.json" mean="" p90=""
    mean=$(field "$f" word_delay_ms_mean) p90=$(field "$f" word_delay_ms_p90)
    printf ' %s / %s |' "${mean:--}" "${p90:--}"  # real.tsv has no word times
  done
  printf '\n'
done
