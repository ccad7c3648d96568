#!/usr/bin/python3
"""Writes tests/audio/data/fbank_reference.bin: log-mel filterbank frames computed by
torchaudio.compliance.kaldi.fbank (an implementation independent of mona's), which
tests/audio/test_fbank_reference.cc compares with mona::audio::compute_fbank.

Run with Debian's Python, which has python3-torchaudio:
    /usr/bin/python3 scripts/make-fbank-reference.py [--out PATH] [--every K]

Signals (the C++ test rebuilds each from its name):
  cards/NNN.wav, librivox/*.wav   Debian's pocketsphinx-testdata recordings (16 kHz, int16)
                                  under /usr/share/pocketsphinx/test/data
  espeak.wav                      tests/audio/data/espeak.wav, 22050 Hz, made once with
                                  espeak-ng -w tests/audio/data/espeak.wav "Monotonic attention
                                  reads the input once, from left to right."
  noise                           48000 samples at 16 kHz from the LCG below (also in the C++
                                  test): 1 s of uniform noise in [-0.5, 0.5), 0.5 s of digital
                                  silence, 1.5 s of the noise scaled by 2^-7. Every value is
                                  exact in float32.
Samples are fed in mona's scale, int16 / 32768 (libsndfile's), in float64, with torch's default
dtype float64 (in which torchaudio builds its mel banks): the reference is torchaudio's
arithmetic without float32 rounding. Its all-float32 run is printed for comparison.

Variants (the same table is in the C++ test), dither 0 everywhere:
  default80     num_mel_bins 80, everything else Kaldi's default
  nosnip80      num_mel_bins 80, snip_edges false
  mel40_energy  num_mel_bins 40, use_energy
  mel40_misc    num_mel_bins 40, use_energy, raw_energy false, energy_floor 1e-3, hamming
                window, low_freq 64, high_freq -400, preemphasis 0.9, snip_edges false

File format (little-endian): b"MFBREF01", u32 record count; per record: u32 length + UTF-8
signal name, u32 length + variant name, i64 samples, i64 frames, u32 bins, u32 stored frames,
then per stored frame u32 frame index and bins float32 values. Stored frames: every K-th
(index % K == 0) and the last.
"""
import argparse
import os
import struct
import sys
import wave

import torch
import torchaudio.compliance.kaldi as kaldi

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PS = "/usr/share/pocketsphinx/test/data"
SIGNALS = ["cards/%03d.wav" % i for i in range(1, 6)] + [
    "librivox/sense_and_sensibility_01_austen_64kb-%04d.wav" % i
    for i in (870, 880, 890, 920, 930)
] + ["espeak.wav", "noise"]

VARIANTS = {
    "default80": dict(num_mel_bins=80),
    "nosnip80": dict(num_mel_bins=80, snip_edges=False),
    "mel40_energy": dict(num_mel_bins=40, use_energy=True),
    "mel40_misc": dict(num_mel_bins=40, use_energy=True, raw_energy=False, energy_floor=1e-3,
                       window_type="hamming", low_freq=64.0, high_freq=-400.0,
                       preemphasis_coefficient=0.9, snip_edges=False),
}


def lcg_noise():
    """The noise signal, as tests/audio/test_fbank_reference.cc makes it."""
    state = 12345
    out = []
    for i in range(48000):
        state = (state * 1664525 + 1013904223) % (1 << 32)
        u = (state >> 8) / 16777216.0 - 0.5
        if i < 16000:
            out.append(u)
        elif i < 24000:
            out.append(0.0)
        else:
            out.append(u / 128.0)
    return torch.tensor(out, dtype=torch.float64), 16000


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, path
        rate = w.getframerate()
        data = w.readframes(w.getnframes())
    x = torch.frombuffer(bytearray(data), dtype=torch.int16).to(torch.float64) / 32768.0
    return x, rate


def load(name):
    if name == "noise":
        return lcg_noise()
    if name == "espeak.wav":
        return read_wav(os.path.join(ROOT, "tests/audio/data/espeak.wav"))
    return read_wav(os.path.join(PS, name))


def fbank(x, rate, variant, dtype):
    # torchaudio builds its mel banks in torch's default dtype: float64 for the reference
    # (with float32 banks the reference moves by up to 4.5e-4 in low-energy bins).
    torch.set_default_dtype(dtype)
    opts = dict(VARIANTS[variant])
    return kaldi.fbank(x.to(dtype).unsqueeze(0), sample_frequency=float(rate), dither=0.0,
                       energy_floor=opts.pop("energy_floor", 0.0), **opts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/audio/data/fbank_reference.bin"))
    ap.add_argument("--every", type=int, default=4)
    args = ap.parse_args()
    records = []
    worst32 = 0.0
    for name in SIGNALS:
        x, rate = load(name)
        for variant in VARIANTS:
            f64 = fbank(x, rate, variant, torch.float64)
            f32 = fbank(x, rate, variant, torch.float32).to(torch.float64)
            d32 = (f64 - f32).abs().max().item() if f64.numel() else 0.0
            worst32 = max(worst32, d32)
            frames, bins = f64.shape
            keep = [t for t in range(frames) if t % args.every == 0 or t == frames - 1]
            records.append((name, variant, x.numel(), frames, bins, keep, f64.to(torch.float32)))
            print("%-56s %-13s %6d samples %5d frames; torchaudio float32 vs float64: %.2e"
                  % (name, variant, x.numel(), frames, d32))
    with open(args.out + ".tmp", "wb") as out:
        out.write(b"MFBREF01")
        out.write(struct.pack("<I", len(records)))
        for name, variant, samples, frames, bins, keep, feats in records:
            for s in (name, variant):
                b = s.encode()
                out.write(struct.pack("<I", len(b)) + b)
            out.write(struct.pack("<qqII", samples, frames, bins, len(keep)))
            for t in keep:
                out.write(struct.pack("<I", t))
                out.write(feats[t].contiguous().numpy().astype("<f4").tobytes())
    os.replace(args.out + ".tmp", args.out)
    print("wrote %s (%d bytes); worst torchaudio float32 vs float64 difference %.2e"
          % (args.out, os.path.getsize(args.out), worst32))


if __name__ == "__main__":
    sys.exit(main())
