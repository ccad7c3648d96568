#!/usr/bin/env bash
# Length generalisation (in the spirit of 003 Table 1): train soft attention, MoChA (w = 4)
# and SAGMM-tr on the words of 4-10 letters, test on 2-3, 4-10 and 11+ letters. Run from the
# repository root after `make demo` (data prepared, build/bin/mona built):
#
#   bash recipes/g2p-cmudict/length.sh
#
# The three trainings run at once (5 minutes each, one thread each, on 2 cores).
set -euo pipefail
BUILD=${BUILD:-build}
mona="$BUILD/bin/mona"
src=data/cache/g2p-cmudict
dst=data/cache/g2p-length
mkdir -p "$dst" runs/g2p-length
letters() { awk -F'\t' -v lo="$2" -v hi="$3" '{ n = split($1, a, " "); if (n >= lo && n <= hi) print }' "$1"; }
letters "$src/train.tsv" 4 10 > "$dst/train_4_10.tsv"
letters "$src/dev.tsv" 4 10 > "$dst/dev_4_10.tsv"
letters "$src/test.tsv" 2 3 > "$dst/test_2_3.tsv"
letters "$src/test.tsv" 4 10 > "$dst/test_4_10.tsv"
letters "$src/test.tsv" 11 1000 > "$dst/test_11_plus.tsv"
names=(soft_uni mocha_w4 sagmm_tr)
pids=()
for n in "${names[@]}"; do
  # --overwrite: a second run of the script retrains (mona refuses to replace a run otherwise)
  "$mona" train "recipes/g2p-cmudict/configs/length/$n.yaml" --overwrite > "runs/g2p-length/$n.train.txt" \
    2> "runs/g2p-length/$n.progress.txt" &
  pids+=($!)
done
failed=0
for k in "${!names[@]}"; do
  if ! wait "${pids[$k]}"; then
    echo "length.sh: training ${names[$k]} failed; the end of runs/g2p-length/${names[$k]}.progress.txt:" >&2
    tail -n 5 "runs/g2p-length/${names[$k]}.progress.txt" >&2
    failed=1
  fi
done
((failed == 0)) || exit 1
field() { printf '%s' "$1" | sed -n "s/.*\"$2\": \([0-9.eE+-]*\).*/\1/p"; }
printf '| mechanism (trained on 4-10 letters) | 2-3 letters PER / WER | 4-10 letters PER / WER | 11+ letters PER / WER | steps |\n| --- | --- | --- | --- | --- |\n'
for n in "${names[@]}"; do
  row="| $n"
  for b in 2_3 4_10 11_plus; do
    j=$("$mona" eval "runs/g2p-length/$n/best.ckpt" "$dst/test_$b.tsv" --beam 0 --json)
    row="$row | $(awk -v p="$(field "$j" token_error_rate)" -v w="$(field "$j" sequence_error_rate)" \
      'BEGIN { printf "%.2f%% / %.2f%%", 100 * p, 100 * w }')"
  done
  echo "$row | $(sed -n 's/^trained \([0-9]*\) steps.*/\1/p' "runs/g2p-length/$n.train.txt") |"
done
