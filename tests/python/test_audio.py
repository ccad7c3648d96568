# mona.Recognizer on an audio model (`mona train` on synthetic tones, 80 steps, about
# 1 s): accept_waveform in any chunks equals recognize_waveform, decode_streams equals
# each stream alone, and a symbol model refuses waveforms.
import json
import math
import random
import struct
import subprocess
import wave

import pytest
import torch

import mona
from conftest import mona_cli

WORDS = {"low": 300.0, "mid": 800.0, "high": 2000.0}


def utterance(words, g):
    """0.2 s tones with 0.05 s pauses at 16 kHz plus a little noise (tests/tools/test_speech_cli.cc)."""
    x = []
    for w in words:
        for n in range(4000):
            t = n / 16000
            env = min(1.0, min(t, 0.25 - t) / 0.01)
            tone = 0.4 * env * math.sin(2 * math.pi * WORDS[w] * t) if n < 3200 else 0.0
            x.append(tone + g.gauss(0, 0.01))
    return x


def write_wav(path, x):
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(16000)
        f.writeframes(b"".join(struct.pack("<h", max(-32767, min(32767, int(v * 32767)))) for v in x))


def write_manifest(d, name, n, seed):
    g = random.Random(seed)
    with open(d / name, "w") as m:
        for k in range(n):
            words = [g.choice(list(WORDS)) for _ in range(g.randint(2, 3))]
            write_wav(d / f"{name}.{k}.wav", utterance(words, g))
            m.write(f"{name}.{k}.wav\t{' '.join(words)}\n")


@pytest.fixture(scope="module")
def audio_checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("audio")
    write_manifest(d, "train.tsv", 8, 1)
    write_manifest(d, "dev.tsv", 2, 2)
    (d / "cfg.yaml").write_text(
        f"data: {{train: {d}/train.tsv, dev: {d}/dev.tsv}}\n"
        "model: {input_kind: audio, features: {num_mel_bins: 20}, conv_channels: 4, encoder_layers: 2,\n"
        "        encoder_hidden: 16, time_reduction_layers: 1, decoder_embedding_dim: 8, decoder_hidden: 16,\n"
        "        attention: {type: monotonic, monotonic_energy: dot, init_r: -1}}\n"
        f"train: {{output_dir: {d}/run, batch_size: 8, max_steps: 80, eval_every: 80, threads: 1,\n"
        "        optimizer: {learning_rate: 0.01}}\n")
    run = subprocess.run([mona_cli(), "train", str(d / "cfg.yaml")], capture_output=True, text=True)
    assert run.returncode == 0, f"mona train failed:\n{run.stdout}\n{run.stderr}"
    return str(d / "run" / "last.ckpt")


def test_waveform_in_chunks_equals_whole(audio_checkpoint):
    rec = mona.Recognizer(audio_checkpoint, beam=0)
    assert rec.takes_audio
    x = torch.tensor(utterance(["mid", "low", "high"], random.Random(7)), dtype=torch.float32)
    whole = rec.recognize_waveform(x, 16000)
    assert whole.final and len(whole.times_ms) == len(whole.tokens)
    assert whole.tokens, "the model emits nothing: the equalities below would be empty"
    for chunk in [160, 1111, x.numel()]:
        s = rec.create_stream()
        for k in range(0, x.numel(), chunk):
            rec.accept_waveform(s, x[k:k + chunk], 16000)
            while rec.is_ready(s):
                rec.decode(s)
        rec.input_finished(s)
        while rec.is_ready(s):
            rec.decode(s)
        assert rec.result(s) == whole  # any chunking: the whole waveform's result (stream.h)
    # two streams decoded together: each as alone, to float rounding (same tokens here)
    y = x.flip(0)
    streams = [rec.create_stream(), rec.create_stream()]
    for s, w in zip(streams, [x, y]):
        rec.accept_waveform(s, w, 16000)
        rec.input_finished(s)
    while any(rec.is_ready(s) for s in streams):
        rec.decode_streams(streams)
    assert rec.result(streams[0]).tokens == whole.tokens
    assert rec.result(streams[1]).tokens == rec.recognize_waveform(y, 16000).tokens


def test_same_tokens_as_mona_transcribe(audio_checkpoint, tmp_path):
    x = utterance(["high", "low"], random.Random(3))
    write_wav(tmp_path / "u.wav", x)
    out = subprocess.run([mona_cli(), "transcribe", "--json", audio_checkpoint, str(tmp_path / "u.wav")],
                         capture_output=True, text=True, check=True).stdout
    expected = json.loads(out.splitlines()[0])["tokens"]
    assert expected, out  # two empty results would agree without testing anything
    with wave.open(str(tmp_path / "u.wav")) as f:  # the 16-bit samples the program read
        pcm = struct.unpack(f"<{f.getnframes()}h", f.readframes(f.getnframes()))
    got = mona.Recognizer(audio_checkpoint).recognize_waveform(
        torch.tensor(pcm, dtype=torch.float32) / 32768, 16000)
    assert got.tokens == expected


def test_waveform_errors(audio_checkpoint, checkpoint):
    rec = mona.Recognizer(audio_checkpoint)
    s = rec.create_stream()
    with pytest.raises(ValueError, match="samples: expected a 1-d"):
        rec.accept_waveform(s, torch.zeros(2, 10), 16000)
    rec.accept_waveform(s, torch.zeros(100), 16000)
    with pytest.raises(ValueError, match="sample_rate"):
        rec.accept_waveform(s, torch.zeros(100), 8000)  # the rate changed within the stream
    # Symbols for an audio model: it says the model takes audio (not "unknown symbol").
    for call in (lambda: rec.accept(rec.create_stream(), ["low"]), lambda: rec.recognize(["low"])):
        with pytest.raises(mona.ArgumentError, match="this model takes audio, not symbols: give samples to "
                           "accept_waveform"):
            call()
    # A rate the binding's int cannot hold: named (it was pybind's TypeError)
    with pytest.raises(mona.ArgumentError, match=r"mona.Recognizer.accept_waveform: sample_rate: expected an "
                       r"integer in \[1, 2\*\*31\), got 2147483648"):
        rec.accept_waveform(rec.create_stream(), torch.zeros(10), 2**31)
    with pytest.raises(mona.ArgumentError, match=r"mona.Recognizer: beam: expected an integer in \[0, 2\*\*63\)"):
        mona.Recognizer(audio_checkpoint, beam=2**63)
    sym = mona.Recognizer(checkpoint)
    assert not sym.takes_audio
    with pytest.raises(ValueError):
        sym.accept_waveform(sym.create_stream(), torch.zeros(100), 16000)
