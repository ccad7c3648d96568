#!/usr/bin/env bash
# `make demo`: grapheme-to-phoneme on CMUdict with MoChA, from a fresh clone.
#   1. installs dependencies and builds (Release)
#   2. fetches cmu-pronouncing-dictionary@3.0.0 (npm pack, sha256-verified) and prepares
#      the train/dev/test splits
#   3. trains a small MoChA model with a unidirectional encoder (recipes/g2p-cmudict/demo.yaml,
#      at most train.max_minutes of training)
#   4. evaluates it on the test split and prints PER, WER, decoding speed, streaming latency
#      (average lagging in letters, share of phonemes emitted before the word ends) and training time
#   5. streams five test words through `mona stream`, showing each phoneme as it is emitted
#      with the letter position where the attention chose to emit it
#   6. writes an alignment PNG and prints its path
# Environment: BUILD (default build), RUN_DIR (default runs/demo), JOBS (default 2),
# DEMO_SET (extra `--set key=value` overrides for training, e.g. "train.max_minutes=1" for a
# quick check of the script).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
RUN_DIR=${RUN_DIR:-runs/demo}
JOBS=${JOBS:-2}
data=data/cache/g2p-cmudict

step() { printf '\n==> %s\n' "$*"; }

step "dependencies and build"
bash scripts/install-deps.sh
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target mona_cli mona-prepare-cmudict
mona="$BUILD/bin/mona"

step "data: CMUdict (npm cmu-pronouncing-dictionary@3.0.0)"
index_js=$(bash scripts/fetch-cmudict.sh | tail -n 1)
"$BUILD/bin/mona-prepare-cmudict" --input "$index_js" --out-dir "$data"

step "training MoChA (recipes/g2p-cmudict/demo.yaml)"
extra=()
for kv in ${DEMO_SET:-}; do extra+=(--set "$kv"); done
# progress goes to stderr; the summary (stdout) is kept to read the training minutes;
# --overwrite: `make demo` run again trains afresh in RUN_DIR (mona refuses to replace a run otherwise)
train_out=$("$mona" train recipes/g2p-cmudict/demo.yaml --overwrite --set "train.output_dir=$RUN_DIR" "${extra[@]}")
printf '%s\n' "$train_out"
minutes=$(printf '%s\n' "$train_out" | sed -n 's/^trained [0-9]* steps in \([0-9.]*\) min.*/\1/p')
ckpt="$RUN_DIR/best.ckpt"

step "evaluation on the test split"
eval_json=$("$mona" eval "$ckpt" "$data/test.tsv" --beam 0 --json)  # greedy: the table says so
field() { printf '%s' "$eval_json" | sed -n "s/.*\"$1\": \([0-9.eE+-]*\).*/\1/p"; }
per=$(field token_error_rate)
wer=$(field sequence_error_rate)
wps=$(field inputs_per_second)
words=$(field inputs)
lag=$(field average_lagging)
early=$(field early_token_share)
printf '\n| model | test words | PER | WER | decoding (words/s, greedy, hard online) | average lagging (letters) | phonemes emitted before the word ends | training (min) |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n'
awk -v per="$per" -v wer="$wer" -v wps="$wps" -v n="$words" -v m="$minutes" -v lag="$lag" -v early="$early" \
  'BEGIN { printf "| MoChA w=4, unidirectional | %d | %.2f%% | %.2f%% | %.0f | %.2f | %.1f%% | %.1f |\n", n, 100*per, 100*wer, wps, lag, 100*early, m }'

step "streaming five test words (letters arrive one at a time)"
# five words spread over the (alphabetical) test split, 6 letters or more
cut -f1 "$data/test.tsv" | tr -d ' ' | awk 'length($0) >= 6 && !seen[$0]++' |
  awk '{ w[NR] = $0 } END { for (k = 1; k <= 5; ++k) print w[int(k * NR / 6)] }' > "$RUN_DIR/stream_words.txt"
"$mona" stream "$ckpt" < "$RUN_DIR/stream_words.txt"

step "alignment plot"
word=$(head -n 1 "$RUN_DIR/stream_words.txt")
png=$("$mona" plot "$ckpt" "$word" -o "$RUN_DIR/alignment_${word}.png")
echo "alignment of \"$word\" written to $png"
