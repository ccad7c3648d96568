#!/usr/bin/env bash
# G2P training throughput (issue 22): mona against the PyTorch eager peer
# (bench/python/g2p_peer.py: the same model, data, batch and optimiser), one and two threads,
# in interleaved rounds so that load on a shared machine affects every configuration alike.
# Writes one CSV row per run (with the run's model size and batch size: mona's "model: N
# parameters" line and the train.batch_size of the configuration it saved, the peer's own
# counts) and prints min / median per configuration.
#
#   bench/g2p-train-throughput.sh [--rounds N] [--steps N] [--csv FILE] [--build DIR]
#                                 [--blas-kernels NAME]
#
# mona: `mona train recipes/g2p-cmudict/configs/mocha_w4.yaml` with train.threads = 1 or 2
# (shards of each batch in parallel, include/mona/nn/threads.h), 100 + N steps, the target
# tokens of the steps after step 100 over their time (from the log records, each a window of
# 100 steps with its rate; the windows' tokens summed over their seconds, the same aggregate
# the peer reports). Peer: as many warm-up steps (100), then N timed steps, torch.set_num_threads(1 or 2) and OPENBLAS_NUM_THREADS the same count, so that
# both sides run on as many threads as the row says: torch.set_num_threads does not reach
# the pool that Debian's OpenBLAS (libopenblas0-pthread) keeps beside ATen's, one thread per
# core by default, which mona sets to one (include/mona/nn/threads.h). With --blas-kernels
# NAME (the OpenBLAS kernel family mona runs, `mona_bench_train --blas-kernels`) the peer runs
# that family too (OPENBLAS_CORETYPE): mona replaces OpenBLAS's Prescott fall-back on CPUs it
# does not know (include/mona/nn/threads.h), which PyTorch does not. The peer is also run at
# one thread in the environment as it is (pytorch_eager_blas_pool: OpenBLAS's default pool
# and kernel family), as a user who sets only torch.set_num_threads(1) runs it. Needs
# data/cache/g2p-cmudict (make demo prepares it) and Debian's python3-torch.
#
# Beside them, every round starts two one-thread mona runs at once (impl mona_side_by_side,
# threads 1, their mean): what a run gets from its core while the other core runs the
# same work, with nothing shared but the machine. Against a one-thread run alone in the same
# round it says how much of its speed independent work keeps when both cores are busy, the
# part of the two-thread ratio that no cut of a batch into shards can win back.
set -euo pipefail
rounds=5 steps=300 csv="" build=build blas_kernels=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --steps) steps=$2; shift ;;
    --csv) csv=$2; shift ;;
    --build) build=$2; shift ;;
    --blas-kernels) blas_kernels=$2; shift ;;
    *) echo "usage: $0 [--rounds N] [--steps N] [--csv FILE] [--build DIR] [--blas-kernels NAME]" >&2; exit 2 ;;
  esac
  shift
done
train=data/cache/g2p-cmudict/train.tsv
[[ -s $train ]] || { echo "g2p-train-throughput: $train missing (run make demo first)" >&2; exit 1; }
mona="$build/bin/mona"
[[ -x $mona ]] || { echo "g2p-train-throughput: $mona not built" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows="$work/rows.csv"
echo "impl,threads,round,tokens_per_second,parameters,batch" > "$rows"
# fail MESSAGE [LOG]: the message and the end of LOG on stderr, and the script stops (the
# exit trap removes the work folder, so the log is shown first).
fail() {
  echo "g2p-train-throughput: $1" >&2
  if [[ -n ${2:-} && -s $2 ]]; then tail -n 20 "$2" >&2; fi
  exit 1
}
# number VALUE WHAT: VALUE if it is a positive number, else the script stops naming WHAT.
number() {
  [[ $1 =~ ^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$ ]] && awk -v v="$1" 'BEGIN { exit !(v > 0) }' ||
    fail "$2: expected a positive number of target tokens/s, got '$1'"
  printf '%s' "$1"
}
mona_run() {  # threads [output dir, default $work/run] -> "target tokens/s after step 100,parameters,batch"
  local out=${2:-$work/run} log=${2:-$work/run}.log
  rm -rf "$out"  # a failed run must not leave an earlier run's log to be read
  "$mona" train recipes/g2p-cmudict/configs/mocha_w4.yaml --overwrite --set "train.output_dir=$out" \
    --set "train.threads=$1" --set "train.max_steps=$((100 + steps))" --set train.log_every=100 \
    --set train.eval_every=1000000 --set train.plot_every=0 --set train.eval_limit=1 >"$log" 2>&1 ||
    fail "mona train with $1 thread(s) failed:" "$log"
  # Records after step 100: each window's seconds from the run's clock ("minutes"), its tokens
  # = rate x seconds; the aggregate is the tokens over the seconds.
  local rate parameters batch
  rate=$(grep '"event":"train"' "$out/train.jsonl" |
    sed 's/.*"minutes":\([0-9.e+-]*\).*"tokens_per_second":\([0-9.e+-]*\).*/\1 \2/;
         s/.*"tokens_per_second":\([0-9.e+-]*\).*"minutes":\([0-9.e+-]*\).*/\2 \1/' |
    awk 'NR > 1 { dt = ($1 - m) * 60; tokens += $2 * dt; seconds += dt } { m = $1 }
         END { if (seconds > 0) printf "%.1f", tokens / seconds }')
  parameters=$(sed -n 's/^model: \([0-9]*\) parameters$/\1/p' "$log" | head -n 1)
  batch=$(sed -n 's/^  batch_size: \([0-9]*\)$/\1/p' "$out/config.yaml" | head -n 1)
  printf '%s,%s,%s' "$rate" "$parameters" "$batch"
}
# row IMPL THREADS ROUND "RATE,PARAMETERS,BATCH" WHAT: the CSV row, each value checked (WHAT
# names the run in the message).
row() {
  local rate parameters batch
  IFS=, read -r rate parameters batch <<< "$4"
  rate=$(number "$rate" "$5") || exit 1
  [[ $parameters =~ ^[1-9][0-9]*$ ]] || fail "$5: expected the model's parameter count, got '$parameters'"
  [[ $batch =~ ^[1-9][0-9]*$ ]] || fail "$5: expected the batch size, got '$batch'"
  echo "$1,$2,$3,$rate,$parameters,$batch" >> "$rows"
}
mona_side_by_side() {  # -> the mean target tokens/s of two one-thread runs started together
  mona_run 1 "$work/left" > "$work/left.tps" &
  local left=$!
  mona_run 1 "$work/right" > "$work/right.tps" || exit 1
  wait "$left" || exit 1
  awk -F, '{ s += $1; n = $2; b = $3 } END { printf "%.1f,%s,%s", s / 2, n, b }' "$work/left.tps" "$work/right.tps"
}
peer_run() {  # threads [blas_threads, empty: OpenBLAS's default pool and kernels] -> "target tokens/s,parameters,batch"
  if [[ -n ${2:-} ]]; then
    if [[ -n $blas_kernels ]]; then
      OPENBLAS_CORETYPE=$blas_kernels OPENBLAS_NUM_THREADS=$2 /usr/bin/python3 bench/python/g2p_peer.py "$train" \
        --threads "$1" --warmup 100 --steps "$steps"
    else
      OPENBLAS_NUM_THREADS=$2 /usr/bin/python3 bench/python/g2p_peer.py "$train" --threads "$1" --warmup 100 --steps "$steps"
    fi
  else
    env -u OPENBLAS_NUM_THREADS -u OPENBLAS_CORETYPE /usr/bin/python3 bench/python/g2p_peer.py "$train" \
      --threads "$1" --warmup 100 --steps "$steps"
  fi | sed -n 's/^\([0-9.e+-]*\) target tokens\/s (.*, batch \([0-9]*\), \([0-9]*\) parameters)$/\1,\3,\2/p'
}
# Each value is checked before it is written: a failed run stops the script (a command
# substitution inside echo would hide its failure).
for ((r = 1; r <= rounds; ++r)); do
  for t in 1 2; do
    v=$(mona_run "$t") || exit 1
    row mona "$t" "$r" "$v" "mona, $t thread(s), round $r"
    v=$(peer_run "$t" "$t") || fail "the peer with $t thread(s) failed (round $r)"
    row pytorch_eager "$t" "$r" "$v" "the peer, $t thread(s), round $r"
  done
  v=$(peer_run 1) || fail "the peer with OpenBLAS's own pool failed (round $r)"
  row pytorch_eager_blas_pool 1 "$r" "$v" "the peer with OpenBLAS's own pool, round $r"
  v=$(mona_side_by_side) || exit 1
  row mona_side_by_side 1 "$r" "$v" "two mona runs side by side, round $r"
done
[[ -n $csv ]] && cp "$rows" "$csv.tmp" && mv "$csv.tmp" "$csv"
for key in "mona,1" "mona,2" "pytorch_eager,1" "pytorch_eager,2" "pytorch_eager_blas_pool,1" "mona_side_by_side,1"; do
  grep "^$key," "$rows" | cut -d, -f4 | sort -n |
    awk -v k="$key" '{ a[NR] = $1 } END {
      med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
      split(k, p, ","); printf "%s, %s threads: min %.0f, median %.0f target tokens/s (%d rounds)\n", p[1], p[2], a[1], med, NR }'
done
