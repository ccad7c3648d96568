# mona.Recognizer over a checkpoint written by `mona train` (a tiny letter-task model trained
# here for 60 steps, about 2 s): the same tokens as `mona decode`, any split of the input
# gives the offline result exactly, and the stream protocol's errors.
import subprocess

import pytest
import torch

import mona
from conftest import mona_cli


WORDS = ["a b c", "f e d c", "a c a c a", "e"]


def test_same_tokens_as_mona_decode(checkpoint):
    out = subprocess.run([mona_cli(), "decode", checkpoint] + WORDS, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    rec = mona.Recognizer(checkpoint)
    assert rec.step == 60 and rec.beam >= 0
    assert len(out) == len(WORDS), out  # mona decode skips an input it cannot encode
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
    # Ids belong in a tensor: a list holding one is named, not pybind's TypeError.
    with pytest.raises(mona.ArgumentError, match=r"mona.Recognizer.accept: inputs\[1\] = 5: expected a symbol "
                       r"\(str\), got int \(give symbol ids as an int64 tensor"):
        rec.accept(s, ["a", 5])
    with pytest.raises(mona.ArgumentError, match=r"mona.Recognizer.recognize: inputs\[0\] = 3"):
        rec.recognize([3, 4])
    with pytest.raises(mona.ArgumentError, match=r"mona.Recognizer.accept: inputs: expected a tensor or a list of "
                       r"symbols, got int"):
        rec.accept(s, 5)
    rec.input_finished(s)
    with pytest.raises(ValueError, match="input_finished"):
        rec.accept(s, ["a"])
    rec.reset(s)
    rec.accept(s, ["a"])  # a reset stream takes input again
    with pytest.raises(ValueError, match="beam"):
        mona.Recognizer(checkpoint, beam=-2)


def test_markers_are_not_input(checkpoint):
    # "</s>" inside an input used to end it there; <pad>, <s> and </s> are the model's own.
    rec = mona.Recognizer(checkpoint)
    with pytest.raises(ValueError, match=r"inputs\[1\] = 2 \(</s>\)"):
        rec.recognize(["a", "</s>", "b"])
    with pytest.raises(ValueError, match=r"inputs\[0\] = 0 \(<pad>\)"):
        rec.recognize(torch.tensor([0, 5]))
