#!/usr/bin/env bash
# The spoken-commands recipe (README.md): makes the corpus, trains the given configurations
# two at a time (one thread each), evaluates each (greedy hard online decoding on every set;
# beam 4 as 003 does and greedy decoding with the soft expected alignment on dev, test-7 and
# test-20; test-long also with 003's long-form rule for models with the EOS frame), writing
# <runs>/<name>.<set>.<decoding>.json (the protocol's runs directory, below), plots the
# alignment of one test-20 utterance for soft attention, MoChA and SAGMM-tr, and prints the
# tables of the README.
# Run from the repository root after building (make build):
#
#   bash recipes/spoken-commands/run.sh [CONFIG_NAME ...]     # default: every configs/*.yaml
#   PROTOCOL=hour bash recipes/spoken-commands/run.sh gmm sagmm_tr
#
# Configurations with train.init_from (fine-tuning) are trained after the others. Training a
# configuration removes its earlier results; an evaluation whose result is there is skipped,
# so a stopped run.sh goes on where it stopped (TRAIN=0). A configuration whose training
# failed is not evaluated, and the script exits with status 1 when any result is missing.
# Environment: BUILD (default build), PROTOCOL (below), CORPUS_ARGS (extra
# mona-make-spoken-commands flags, other than the sizes --train, --dev, --test and --long
# that the protocol sets: an option given twice is a usage error), TRAIN=0 (use the runs there are, train nothing), EVAL=0
# (tabulate the results there are).
#
# PROTOCOL=table (the default): 6,000 training utterances of 5-9 words (9.4 hours of
# audio), 200 dev, 100 per test length, 10 long; each configuration's own schedule (5,000
# steps; soft attention 10,000), into runs/spoken-commands.
# PROTOCOL=hour (the issue's): 20,000 training utterances (31 hours), 200 dev, 500 per
# test length, 10 long; an hour of training per model, the learning rate halved every 6,000
# steps, into runs/spoken-commands-hour; a fine-tuned model (train.init_from) gets 20
# minutes on top of its start's hour, the third that its configuration gives it in steps.
# README.md says why these sizes.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/two-at-a-time.sh"
BUILD=${BUILD:-build}
mona="$BUILD/bin/mona"
configs_dir=recipes/spoken-commands/configs
case ${PROTOCOL:-table} in
  table)
    data=data/cache/spoken-commands out=runs/spoken-commands
    corpus=(--train 6000 --dev 200 --test 100 --long 10) schedule=() tuned_schedule=() ;;
  hour)
    data=data/cache/spoken-commands-20k out=runs/spoken-commands-hour
    corpus=(--train 20000 --dev 200 --test 500 --long 10)
    schedule=(--set train.max_steps=100000 --set train.max_minutes=60 --set train.optimizer.decay_every=6000
              --set train.optimizer.decay_factor=0.5)
    tuned_schedule=(--set train.max_minutes=20) ;;
  *) echo "run.sh: PROTOCOL: expected table or hour, got '$PROTOCOL'" >&2; exit 2 ;;
esac
sets=(dev test-3 test-7 test-10 test-15 test-20 test-long real)
decodings=(greedy beam4 expected)
configs=("$@")
if [[ ${#configs[@]} -eq 0 ]]; then
  for f in "$configs_dir"/*.yaml; do configs+=("$(basename "$f" .yaml)"); done
fi
# A configuration name that is not there is a usage error before the corpus is made (which
# takes minutes), not a string of missing-file errors after it.
for name in "${configs[@]}"; do
  if [[ ! -f "$configs_dir/$name.yaml" ]]; then
    echo "run.sh: no configuration '$name' ($configs_dir/$name.yaml); there are:" \
      $(for f in "$configs_dir"/*.yaml; do basename "$f" .yaml; done) >&2
    exit 2
  fi
done
first=() then=()
for name in "${configs[@]}"; do
  if grep -q '^ *init_from:' "$configs_dir/$name.yaml"; then then+=("$name"); else first+=("$name"); fi
done

"$BUILD/bin/mona-make-spoken-commands" --words recipes/spoken-commands/words.txt --out-dir "$data" \
  "${corpus[@]}" ${CORPUS_ARGS:-}

# The configurations name the table's corpus and runs; the protocol's are set here (a
# fine-tuned model starts from the same protocol's run).
train_one() {
  local where=(--set "data.train=$data/train.tsv" --set "data.dev=$data/dev.tsv" --set "data.test=$data/test-7.tsv"
               --set "train.output_dir=$out/$1")
  local from
  from=$(sed -n 's|^ *init_from: *runs/spoken-commands/\([^ ]*\).*|\1|p' "$configs_dir/$1.yaml")
  local when=("${schedule[@]}")
  if [[ -n $from ]]; then where+=(--set "train.init_from=$out/$from"); when+=("${tuned_schedule[@]}"); fi
  # The results and the plot of the model this replaces (result() keeps a result that is
  # there, so that an interrupted evaluation goes on where it stopped).
  rm -f "$out/$1".*.json "$out/alignment_$1_test-20.png"
  "$mona" train "$configs_dir/$1.yaml" --overwrite "${where[@]}" "${when[@]}" > "$out/$1.train.txt" \
    2> "$out/$1.progress.txt"
}
# Whether configuration $1's training failed: its output is there without the closing
# "trained N steps ..." line. (Runs put into $out by other means, with no output, count as
# trained.) A failed training may leave an earlier run's checkpoint, which is not scored.
training_failed() { [[ -f "$out/$1.train.txt" ]] && ! grep -q '^trained ' "$out/$1.train.txt"; }
# result FILE ARGS...: `mona eval ARGS --json` into FILE (through a temporary name), unless
# FILE holds a result already: an interrupted run.sh goes on where it stopped. One thread:
# two evaluations run side by side (decoding's default of two threads each would put four
# threads on the two cores, and each evaluation would run several times slower).
result() {
  local file=$1
  shift
  if [[ -s $file ]]; then return; fi
  if "$mona" --threads 1 eval "$@" --json > "$file.part"; then mv "$file.part" "$file"; else rm -f "$file.part"; fi
}
# Greedy online decoding on every set; beam 4 and the expected alignment on the sets the
# targets read (dev, test-7, test-20), which keeps a model's evaluation to a few minutes.
eval_one() {
  local name=$1 ckpt="$out/$1/best.ckpt"
  if training_failed "$name"; then
    rm -f "$out/$name".*.json
    echo "run.sh: $name: training failed ($out/$name.progress.txt says why), not evaluated" >&2
    return 1
  fi
  for set in "${sets[@]}"; do
    result "$out/$name.$set.greedy.json" "$ckpt" "$data/$set.tsv" --beam 0
  done
  for set in dev test-7 test-20; do
    result "$out/$name.$set.beam4.json" "$ckpt" "$data/$set.tsv" --beam 4
    result "$out/$name.$set.expected.json" "$ckpt" "$data/$set.tsv" --beam 0 --expected
  done
  if grep -q '^ *p_eos:' "$configs_dir/$name.yaml"; then  # 003 sec. 4.2: </s> only once the last entry is reached
    result "$out/$name.test-long.greedy-rule.json" "$ckpt" "$data/test-long.tsv" --beam 0 \
      --set decode.eos_only_at_last_entry=true
  fi
}
mkdir -p "$out"
if [[ ${TRAIN:-1} != 0 ]]; then
  two_at_a_time train_one "${first[@]}"
  if [[ ${#then[@]} -gt 0 ]]; then two_at_a_time train_one "${then[@]}"; fi
fi
if [[ ${EVAL:-1} != 0 ]]; then two_at_a_time eval_one "${configs[@]}"; fi

# Alignment plots of the first test-20 utterance, its reference forced (mona plot): soft
# attention, MoChA and SAGMM-tr when they were trained.
first20=$(head -1 "$data/test-20.tsv")
for name in soft mocha sagmm_tr; do
  if [[ -f "$out/$name/best.ckpt" ]] && ! training_failed "$name"; then
    "$mona" plot "$out/$name/best.ckpt" "$data/$(cut -f1 <<< "$first20")" --reference "$(cut -f2 <<< "$first20")" \
      -o "$out/alignment_${name}_test-20.png"
  fi
done

# A table's header: | model | $1 | one column per set |
header() {
  printf '| model | %s |' "$1"
  for set in "${sets[@]}"; do printf ' %s |' "$set"; done
  printf '\n| --- | --- |'
  for set in "${sets[@]}"; do printf ' --- |'; done
  printf '\n'
}
# A number of a JSON result file (empty when the file or the field is missing).
field() { if [[ -s $1 ]]; then sed -n "s/.*\"$2\": \([0-9.eE+-]*\).*/\1/p" "$1"; fi; }
wer() { field "$1" token_error_rate | awk '{ printf "%.2f", 100 * $1 }'; }
header decoding
for name in "${configs[@]}"; do
  for d in "${decodings[@]}"; do
    printf '| %s | %s |' "$name" "$d"
    for set in "${sets[@]}"; do printf ' %s |' "$(wer "$out/$name.$set.$d.json")"; done
    printf '\n'
  done
done

# 003's targets and the issue's, per model (greedy online decoding; soft attention:
# its hard decoding is its only decoding): test-20 / test-7 and test-long / test-7 WER,
# test-long with the long-form rule, and what the run cost.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }'; }
printf '\n| model | test-20 / test-7 | test-long / test-7 | test-long, long-form rule | steps | training (min) | real-time factor (test-20, greedy) |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
for name in "${configs[@]}"; do
  w7=$(wer "$out/$name.test-7.greedy.json") w20=$(wer "$out/$name.test-20.greedy.json")
  wl=$(wer "$out/$name.test-long.greedy.json") rule=$(wer "$out/$name.test-long.greedy-rule.json")
  last=$(grep -s '"event":"train"' "$out/$name/train.jsonl" | tail -1 || true)
  steps=$(sed -n 's/.*"step":\([0-9]*\).*/\1/p' <<< "$last")
  minutes=$(sed -n 's/.*"minutes":\([0-9.eE+-]*\).*/\1/p' <<< "$last" | awk '{ printf "%.1f", $1 }')
  rtf=$(field "$out/$name.test-20.greedy.json" real_time_factor | awk '{ printf "%.4f", $1 }')
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$(ratio "$w20" "$w7")" "$(ratio "$wl" "$w7")" \
    "${rule:--}" "${steps:--}" "${minutes:--}" "${rtf:--}"
done

# Streaming latency of greedy online decoding: the emission delay after each recognised
# word's end in the audio (mona eval reads <set>.words.tsv beside the manifest), mean / 90th
# percentile in ms.
printf '\n'
header 'emission delay (ms, mean / p90)'
for name in "${configs[@]}"; do
  printf '| %s | greedy |' "$name"
  for set in "${sets[@]}"; do
    f="$out/$name.$set.greedy.json"
    mean=$(field "$f" word_delay_ms_mean | awk '{ printf "%.0f", $1 }') p90=$(field "$f" word_delay_ms_p90 | awk '{ printf "%.0f", $1 }')
    printf ' %s / %s |' "${mean:--}" "${p90:--}"  # real.tsv has no word times
  done
  printf '\n'
done

# WER by voice group, greedy online decoding (mona eval reads <set>.voices.tsv beside the
# manifest; the group is the synthesizer). The held-out espeak-ng voices are variants of a
# synthesizer with hundreds of training voices; flite's and festival's held-out speakers
# are single people, with two (flite) and one (festival) training speakers beside them.
group_wer() {
  if [[ -s $1 ]]; then
    python3 -c 'import json, sys
g = json.load(open(sys.argv[1])).get("by_voice_group", {}).get(sys.argv[2])
print("%.2f" % (100 * g["token_error_rate"]) if g else "")' "$1" "$2"
  fi
}
printf '\n'
header 'voice group'
for name in "${configs[@]}"; do
  for group in espeak-ng flite festival; do
    printf '| %s | %s |' "$name" "$group"
    for set in "${sets[@]}"; do printf ' %s |' "$(group_wer "$out/$name.$set.greedy.json" "$group")"; done
    printf '\n'
  done
done

# Exit status 1 when a configuration has a result missing (a failed training or evaluation;
# the tables show it as "-" or an empty cell). The sets without a manifest are left out.
status=0
for name in "${configs[@]}"; do
  missing=()
  for set in "${sets[@]}"; do
    [[ -f $data/$set.tsv ]] || continue
    wanted=(greedy)
    case $set in dev | test-7 | test-20) wanted+=(beam4 expected) ;; esac
    if [[ $set == test-long ]] && grep -q '^ *p_eos:' "$configs_dir/$name.yaml"; then wanted+=(greedy-rule); fi
    for d in "${wanted[@]}"; do
      if [[ ! -s $out/$name.$set.$d.json ]]; then missing+=("$set.$d"); fi
    done
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "run.sh: $name has ${#missing[@]} results missing (${missing[*]}); see $out/$name.progress.txt" >&2
    status=1
  fi
done
exit $status
