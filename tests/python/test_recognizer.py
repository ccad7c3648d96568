# mona.Recognizer over a checkpoint written by `mona train` (a tiny letter-task model trained
# here for 60 steps, about 2 s): the same tokens as `mona decode`, any split of the input
# gives the offline result exactly, and the stream protocol's errors.
import os
import random
import shutil
import subprocess

import pytest
import torch

import mona

HERE = os.path.dirname(os.path.abspath(__file__))


def mona_cli():
    cli = os.environ.get("MONA_CLI") or os.path.join(HERE, "..", "..", "build", "bin", "mona")
    if not os.path.exists(cli):
        pytest.skip("the mona program is not built (ctest sets MONA_CLI)")
    return cli


def write_task(path, n, seed):
    """2-6 letters a..f, no letter twice in a row, spelled as F..A (tests/util/letter_task.h)."""
    g = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            prev, ins, outs = -1, [], []
            for _ in range(g.randint(2, 6)):
                s = g.randint(0, 5)
                while s == prev:
                    s = g.randint(0, 5)
                prev = s
                ins.append(chr(ord("a") + s))
                outs.append(chr(ord("F") - s))
            f.write(" ".join(ins) + "\t" + " ".join(outs) + "\n")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    write_task(d / "train.tsv", 100, 9)
    write_task(d / "dev.tsv", 8, 10)
    (d / "cfg.yaml").write_text(
        f"data: {{train: {d}/train.tsv, dev: {d}/dev.tsv}}\n"
        "model: {embedding_dim: 8, encoder_layers: 1, encoder_hidden: 16, decoder_embedding_dim: 8,\n"
        "        decoder_hidden: 16, attention: {type: monotonic, monotonic_energy: dot, init_r: -1}}\n"
        f"train: {{output_dir: {d}/run, max_steps: 60, eval_every: 60, batch_size: 8, threads: 1}}\n")
    subprocess.run([mona_cli(), "train", str(d / "cfg.yaml")], check=True, capture_output=True)
    return str(d / "run" / "last.ckpt")


WORDS = ["a b c", "f e d c", "a c a c a", "e"]


def test_same_tokens_as_mona_decode(checkpoint):
    out = subprocess.run([mona_cli(), "decode", checkpoint] + WORDS, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    rec = mona.Recognizer(checkpoint)
    assert rec.step == 60 and rec.beam >= 0
    for word, line in zip(WORDS, out):
        r = rec.recognize(word.split())
        assert line == word + "\t" + " ".join(r.tokens)
        assert r.final and len(r.token_ids) == len(r.input_positions) == len(r.tokens)


def test_streaming_equals_offline_for_any_split(checkpoint):
    rec = mona.Recognizer(checkpoint, beam=0)
    symbols = "a c e b d f a".split()
    offline = rec.recognize(symbols)
    for split in [[1] * 7, [3, 4], [7], [2, 0, 5]]:
        s = rec.create_stream()
        k = 0
        for n in split:
            rec.accept(s, symbols[k:k + n])
            k += n
            while rec.is_ready(s):
                rec.decode(s)
        rec.input_finished(s)
        while rec.is_ready(s):
            rec.decode(s)
        r = rec.result(s)
        assert s.input_finished and s.inputs_received == 7
        assert r == offline  # tokens, positions and score, exactly (stream.h)
    ids = torch.tensor([rec.input_symbols.index(x) for x in symbols])
    assert rec.recognize(ids) == offline


def test_stream_errors(checkpoint):
    rec = mona.Recognizer(checkpoint)
    s = rec.create_stream()
    with pytest.raises(ValueError, match="unknown"):
        rec.accept(s, ["a", "zz"])
    with pytest.raises(mona.ArgumentError, match="list of symbols"):
        rec.accept(s, "abc")
    rec.input_finished(s)
    with pytest.raises(ValueError, match="input_finished"):
        rec.accept(s, ["a"])
    rec.reset(s)
    rec.accept(s, ["a"])  # a reset stream takes input again
    with pytest.raises(ValueError, match="beam"):
        mona.Recognizer(checkpoint, beam=-2)
