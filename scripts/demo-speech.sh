#!/usr/bin/env bash
# `make demo-speech`: spoken commands, audio in and words out, streamed, from a fresh clone.
#   1. installs dependencies (espeak-ng, flite, festival and its English voices, sox among
#      them) and builds (Release)
#   2. makes a small corpus with mona-make-spoken-commands (4,000 training utterances of 1-4
#      words, 100 test utterances per length; recipes/spoken-commands: every
#      English voice of the three synthesizers, test speakers held out; cached under
#      data/cache/spoken-commands-demo, so a second run skips it)
#   3. trains a small streaming model (recipes/spoken-commands/demo.yaml: SAGMM-tr with 003's
#      EOS frame and long-form rule, at most train.max_minutes of training)
#   4. prints the test WER per utterance length (3, 7, 10, 15 and 20 words; trained on 1-4)
#      and on Debian's real recordings (pocketsphinx-testdata)
#   5. streams one held-out 20-word WAV through `mona stream --audio`, each word printed as
#      it is emitted with its time in the audio
#   6. writes an alignment PNG of that utterance and prints its path
# Environment: BUILD (default build), RUN_DIR (default runs/demo-speech), JOBS (default 2),
# DEMO_SET (extra `--set key=value` overrides for training, e.g. "train.max_minutes=1").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
BUILD=${BUILD:-build}
RUN_DIR=${RUN_DIR:-runs/demo-speech}
JOBS=${JOBS:-2}
data=data/cache/spoken-commands-demo

step() { printf '\n==> %s\n' "$*"; }

step "dependencies and build"
bash scripts/install-deps.sh
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target mona_cli mona-make-spoken-commands
mona="$BUILD/bin/mona"

step "corpus: Debian's English voices (recipes/spoken-commands)"
"$BUILD/bin/mona-make-spoken-commands" --words recipes/spoken-commands/words.txt --out-dir "$data" \
  --train 4000 --train-words 1,4 --dev 100 --test 100 --long 0 --threads "$JOBS"

step "training (recipes/spoken-commands/demo.yaml)"
extra=()
for kv in ${DEMO_SET:-}; do extra+=(--set "$kv"); done
train_out=$("$mona" train recipes/spoken-commands/demo.yaml --overwrite --set "train.output_dir=$RUN_DIR" "${extra[@]}")
printf '%s\n' "$train_out"
ckpt="$RUN_DIR/best.ckpt"

step "test WER per utterance length (greedy, hard online decoding)"
printf '| set | utterances | WER | sentences wrong | emission delay after the word, mean / p90 |\n| --- | --- | --- | --- | --- |\n'
for set in test-3 test-7 test-10 test-15 test-20 real; do
  json=$("$mona" eval "$ckpt" "$data/$set.tsv" --beam 0 --json)
  field() { printf '%s' "$json" | sed -n "s/.*\"$1\": \([0-9.eE+-]*\).*/\1/p"; }
  # real.tsv has no word times (<set>.words.tsv): no delay
  awk -v s="$set" -v n="$(field inputs)" -v w="$(field token_error_rate)" -v e="$(field sequence_error_rate)" \
    -v dm="$(field word_delay_ms_mean)" -v dp="$(field word_delay_ms_p90)" \
    'BEGIN { d = dm == "" ? "-" : sprintf("%.0f / %.0f ms", dm, dp)
             printf "| %s | %d | %.2f%% | %.1f%% | %s |\n", s, n, 100 * w, 100 * e, d }'
done

step "streaming a held-out 20-word utterance (10 ms chunks)"
wav="$data/$(head -n 1 "$data/test-20.tsv" | cut -f1)"
echo "reference: $(head -n 1 "$data/test-20.tsv" | cut -f2)"
"$mona" stream "$ckpt" --audio "$wav"

step "alignment plot"
png=$("$mona" plot "$ckpt" "$wav" -o "$RUN_DIR/alignment_test-20.png")
echo "alignment of $wav written to $png"
