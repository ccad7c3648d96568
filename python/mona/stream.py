"""Online recognition with a model trained by ``mona train`` (``include/mona/stream/stream.h``).

A :class:`Recognizer` holds the model and is not changed by decoding; each utterance is a
stream that it advances::

    rec = mona.Recognizer("runs/g2p/mocha_w4/best.ckpt")  # recipes/g2p-cmudict
    s = rec.create_stream()
    rec.accept(s, ["h", "e", "l"])         # symbols (str), ids (int64 tensor [n]) or frames [n, F]
                                           # (audio models: rec.accept_waveform(s, samples, rate))
    while rec.is_ready(s):
        rec.decode(s)
    rec.accept(s, ["l", "o"])
    rec.input_finished(s)
    while rec.is_ready(s):
        rec.decode(s)
    print(rec.result(s).tokens)

Offline decoding (:meth:`Recognizer.recognize`) is the same sequence with all input at
once, and the result does not depend on how the input is split (bit for bit). Decoding
calls release the GIL; use one stream per thread.
"""

from typing import List, NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor

from . import _C
from .functional import _integer

Inputs = Union[Tensor, Sequence[str]]


class StreamResult(NamedTuple):
    """What has been recognised so far: ``tokens`` (output symbols, no <s> / </s>),
    ``token_ids``, per token the chosen ``memory_positions``, the corresponding
    ``input_positions`` and (audio models) ``times_ms``, the end in milliseconds of audio of
    the last frame the token's memory entry has read (see stream.h); the hypothesis'
    log-probability ``score``, and ``final`` (decoding has ended)."""
    tokens: List[str]
    token_ids: List[int]
    memory_positions: List[int]
    input_positions: List[int]
    times_ms: List[float]
    score: float
    final: bool


class Recognizer:
    """Loads a checkpoint written by ``mona train`` and advances streams over it.

    Args:
        checkpoint: path of a ``.ckpt`` file.
        beam: beam width (0: greedy online decoding); None keeps the checkpoint's
            ``decode.beam``.

    Raises:
        mona.DataError (OSError and RuntimeError): the file is missing, truncated, corrupt
            or not a mona checkpoint (the message names the file).
        mona.ArgumentError (ValueError): beam < 0 or not an integer.
    """

    def __init__(self, checkpoint: str, beam: Optional[int] = None):
        if beam is not None:
            beam = _integer("mona.Recognizer", "beam", beam, lo=0)
        self._rec = _C.Recognizer(str(checkpoint), -1 if beam is None else beam)

    @property
    def input_symbols(self) -> List[str]:
        """The input vocabulary, by id."""
        return self._rec.input_symbols

    @property
    def output_symbols(self) -> List[str]:
        """The output vocabulary, by id."""
        return self._rec.output_symbols

    @property
    def beam(self) -> int:
        """The beam width in use (0: greedy)."""
        return self._rec.beam

    @property
    def step(self) -> int:
        """The training step of the checkpoint."""
        return self._rec.step

    def create_stream(self):
        """A new stream (one utterance); it keeps this recognizer alive."""
        return self._rec.create_stream()

    def _tensor(self, fn: str, inputs: Inputs) -> Tensor:
        # fn: the calling method, named in the errors.
        if isinstance(inputs, Tensor):
            return inputs
        where = f"mona.Recognizer.{fn}: inputs"
        if isinstance(inputs, str):
            raise _C.ArgumentError(
                f"{where}: expected a tensor or a list of symbols, got a str "
                "(split it first, e.g. list(word))")
        try:
            symbols = list(inputs)
        except TypeError:  # not a sequence at all (list() named no argument)
            raise _C.ArgumentError(f"{where}: expected a tensor or a list of symbols, got "
                                   f"{type(inputs).__name__}") from None
        if self.takes_audio:
            raise _C.ArgumentError(
                f"{where}: this model takes audio, not symbols: give samples to accept_waveform or "
                "recognize_waveform (or feature frames [n, F] as a float tensor)")
        for i, x in enumerate(symbols):
            if not isinstance(x, str):
                raise _C.ArgumentError(
                    f"{where}[{i}] = {x!r}: expected a symbol (str), got {type(x).__name__} "
                    "(give symbol ids as an int64 tensor, e.g. torch.tensor(ids))")
        return torch.tensor(self._rec.encode_input(symbols), dtype=torch.int64)

    def accept(self, stream, inputs: Inputs) -> None:
        """Appends input: a list of input symbols (str, encoded with the checkpoint's
        vocabulary), int64 symbol ids ``[n]``, or float frames ``[n, F]``.

        Raises:
            mona.ArgumentError (ValueError): a finished stream, inputs of the wrong kind
                (symbols for an audio model, a list holding anything but str), symbols
                outside the vocabulary (all listed).
        """
        self._rec.accept(stream, self._tensor("accept", inputs))

    @property
    def takes_audio(self) -> bool:
        """Whether the model reads audio (:meth:`accept_waveform`)."""
        return self._rec.takes_audio

    def accept_waveform(self, stream, samples, sample_rate: int) -> None:
        """Audio models: appends mono samples in [-1, 1] (a 1-d float tensor, or anything
        ``torch.as_tensor`` turns into one) at ``sample_rate`` Hz, resampled to the model's
        rate; every call of a stream must give the same rate. Any chunking gives the result
        of the whole waveform at once.

        Raises:
            mona.ArgumentError (ValueError): a model that does not take audio, a finished
                stream, sample_rate <= 0 or changed within the stream, samples not 1-d.
        """
        self._rec.accept_waveform(stream, torch.as_tensor(samples),
                                  _integer("mona.Recognizer.accept_waveform", "sample_rate", sample_rate, lo=1, hi=2**31))

    def recognize_waveform(self, samples, sample_rate: int) -> "StreamResult":
        """Offline, audio models: :meth:`accept_waveform` of all of it, finish, decode."""
        rate = _integer("mona.Recognizer.recognize_waveform", "sample_rate", sample_rate, lo=1, hi=2**31)
        return self._result(self._rec.recognize_waveform(torch.as_tensor(samples), rate))

    def decode_streams(self, streams) -> None:
        """Advances several distinct streams together: the encoder runs batched across them,
        then each is decoded as far as it can be. Each result equals decoding the stream alone
        up to float rounding (stream.h)."""
        self._rec.decode_streams(list(streams))

    def input_finished(self, stream) -> None:
        """No more input for this utterance."""
        self._rec.input_finished(stream)

    def is_ready(self, stream) -> bool:
        """Whether :meth:`decode` can make progress now."""
        return self._rec.is_ready(stream)

    def decode(self, stream) -> None:
        """Decodes as far as the input received so far allows."""
        self._rec.decode(stream)

    def reset(self, stream) -> None:
        """Clears the stream for a new utterance."""
        self._rec.reset(stream)

    def _result(self, r) -> StreamResult:
        ids = list(r.token_ids)
        return StreamResult(self._rec.decode_output(ids), ids, list(r.memory_positions),
                            list(r.input_positions), list(r.times_ms), float(r.score),
                            bool(r.final))

    def result(self, stream) -> StreamResult:
        """What has been recognised so far (:class:`StreamResult`)."""
        return self._result(self._rec.result(stream))

    def recognize(self, inputs: Inputs) -> StreamResult:
        """Offline: accept everything, finish, decode to the end (the same code path)."""
        return self._result(self._rec.recognize(self._tensor("recognize", inputs)))


__all__ = ["Recognizer", "StreamResult"]
