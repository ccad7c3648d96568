#!/usr/bin/env bash
# Streaming memory of `mona stream --audio - --long-form`: a small MoChA model (encoder 2 x 128)
# trained for 2000 steps (under a minute) on synthesized tone "words" (low 300 Hz, mid 800 Hz, high 2 kHz:
# 0.2 s each, 0.05 s pauses; utterances of 3-8 words), then one minute and one hour of such
# speech piped in as raw 16-bit PCM, decoded without </s> until the input ends. Prints the peak
# resident memory (GNU time's maximum RSS) of each run, the memory entries the stream
# holds, the tokens emitted and the real-time factor; a soft-attention model, which keeps its
# whole memory, the same way for contrast, on the minute only (at the end of an hour its
# decoding attends over all 45,000 entries at every one of up to 90,000 steps: quadratic). The audio is generated on the fly by Debian's
# Python (no file of an hour is written).
#
#   scripts/measure-stream-memory.sh [BUILD_DIR]      (default: build)
set -euo pipefail
build=${1:-build}
mona="$build/bin/mona"
[[ -x "$mona" ]] || { echo "measure-stream-memory: $mona not found (make build first)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "measure-stream-memory: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# words.py MODE SECONDS SEED: raw s16le 16 kHz tone words on stdout (MODE raw), or a
# manifest of WAV files in the current directory (MODE manifest, SECONDS = utterances).
cat > "$work/words.py" <<'PY'
import math, random, struct, sys, wave
mode, amount, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
words = [("low", 300.0), ("mid", 800.0), ("high", 2000.0)]
def word(f):
    out = bytearray()
    for n in range(4000):
        t = n / 16000.0
        env = min(1.0, min(t, 0.25 - t) / 0.01)
        x = (0.4 * env * math.sin(2 * math.pi * f * t) if n < 3200 else 0.0) + rng.gauss(0, 0.01)
        out += struct.pack("<h", max(-32768, min(32767, int(round(x * 32768)))))
    return bytes(out)
cache = {}
if mode == "raw":
    for _ in range(int(amount * 4)):  # 4 words per second
        name, f = rng.choice(words)
        if name not in cache: cache[name] = word(f)
        sys.stdout.buffer.write(cache[name])
else:
    with open("train.tsv", "w") as manifest:
        for k in range(int(amount)):
            chosen = [rng.choice(words) for _ in range(rng.randint(3, 8))]
            with wave.open(f"u{k}.wav", "wb") as w:
                w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
                w.writeframes(b"".join(word(f) for _, f in chosen))
            manifest.write(f"u{k}.wav\t{' '.join(n for n, _ in chosen)}\n")
PY

(cd "$work" && /usr/bin/python3 words.py manifest 96 1)
for mech in mocha soft; do
  cat > "$work/$mech.yaml" <<YAML
data: {train: $work/train.tsv}
model: {input_kind: audio, features: {num_mel_bins: 20}, conv_channels: 4, encoder_layers: 2,
        encoder_hidden: 128, time_reduction_layers: 1, decoder_embedding_dim: 8, decoder_hidden: 32,
        attention: {type: $mech, monotonic_energy: dot, init_r: -1, chunk_size: 2, noise_std: 2}}
train: {output_dir: $work/run-$mech, batch_size: 8, max_steps: 2000, eval_every: 2000, threads: 1,
        optimizer: {learning_rate: 0.01}}
YAML
  # The log is in $work, which the exit trap removes: on a failure, show its end first.
  "$mona" train "$work/$mech.yaml" > "$work/train-$mech.log" 2>&1 || {
    echo "measure-stream-memory: training $mech failed; the end of its log:" >&2
    tail -n 20 "$work/train-$mech.log" >&2
    exit 1
  }
  lengths="60 3600"
  [[ $mech == soft ]] && lengths=60
  for seconds in $lengths; do
    /usr/bin/python3 "$work/words.py" raw "$seconds" 2 |
      /usr/bin/time -f "%M" -o "$work/rss" "$mona" --threads 1 stream "$work/run-$mech/last.ckpt" --audio - --rate 16000 --long-form \
        > "$work/out" 2>&1
    tokens=$(grep -c " emitted at " "$work/out" || true)
    summary=$(tail -n 1 "$work/out")
    printf '%-6s %5d s of audio: peak RSS %6d KB, %5d tokens emitted; %s\n' "$mech" "$seconds" "$(cat "$work/rss")" \
      "$tokens" "${summary#*: }"
  done
done
