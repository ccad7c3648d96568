"""mona for PyTorch: exact monotonic, chunkwise, GMM and conditional Bernoulli alignments.

``import mona`` loads the compiled extension ``mona._C``, which registers the operators
``torch.ops.mona.*`` (CPU kernels and autograd through mona's analytic backward passes;
callable from TorchScript) and the streaming :class:`Recognizer`. The modules:

* :mod:`mona.functional`: the operators with shapes, dtypes, errors and paper equations;
* :mod:`mona.nn`: ``torch.nn.Module`` wrappers for the attention mechanisms;
* :mod:`mona.compat.fairseq`: fairseq's ``expected_alignment_from_p_choose``, exact and
  differentiable;
* :class:`Recognizer`: decoding a checkpoint written by ``mona train``, online;
* :func:`use_best_blas_kernels`: PyTorch's matrix products on the kernels of the CPU's
  vector units where Debian's OpenBLAS fell back to its SSE3 ones (a CPU model it does not
  know), as mona's C++ programs run them.

Papers are cited by file number of ``shared/papers`` (README.md there): 000 MoChA, 002 hard
monotonic attention, 003 source-aware GMM attention, 004 the conditional Bernoulli.

Errors: a bad argument raises :class:`ArgumentError` (a ``ValueError``) with mona's message;
an unreadable or corrupt file raises :class:`DataError` (both an ``OSError`` and a
``RuntimeError``).
"""

try:
    import torch  # noqa: F401  (loads LibTorch before the extension, which links it)
except ImportError as e:
    import sys as _sys
    raise ImportError(
        f"mona needs PyTorch, and {_sys.executable} cannot import torch: use the Python that "
        "mona's extension was built against (Debian: /usr/bin/python3 with python3-torch). "
        f"Cause: {e}") from e

try:
    from . import _C
except ImportError as e:  # the extension is built by `make python` (README)
    raise ImportError(
        "mona's compiled extension (mona/_C*.so) is missing or does not load: build it with "
        "`make python` in the mona repository, and use the Python whose torch it was built "
        f"against (Debian: /usr/bin/python3). Cause: {e}") from e

from ._C import ArgumentError, DataError, use_best_blas_kernels  # noqa: E402
ArgumentError.__module__ = DataError.__module__ = "mona"
from . import functional  # noqa: E402
from . import nn  # noqa: E402
from .functional import (  # noqa: E402
    additive_energy, attention_context, cb_bb_step_log_probs, cb_db_step_log_probs, cb_idb_step_log_probs, cb_log_prob,
    cb_log_table, cb_marginal_log_likelihood, cb_marginals, cb_sample, gmm_attention_weights,
    gmm_length_penalty, masked_softmax, matcha_chunkwise, mocha_chunkwise, monotonic_alignment,
    monotonic_alignment_step, monotonic_attention_step, poisson_binomial_log_prob)
from .stream import Recognizer, StreamResult  # noqa: E402

__all__ = [
    "ArgumentError", "DataError", "Recognizer", "StreamResult", "functional", "nn",
    "additive_energy", "attention_context",
    "cb_bb_step_log_probs", "cb_db_step_log_probs", "cb_idb_step_log_probs", "cb_log_prob",
    "cb_log_table", "cb_marginal_log_likelihood", "cb_marginals", "cb_sample",
    "gmm_attention_weights", "gmm_length_penalty", "masked_softmax", "matcha_chunkwise",
    "mocha_chunkwise", "monotonic_alignment", "monotonic_alignment_step", "monotonic_attention_step",
    "poisson_binomial_log_prob", "use_best_blas_kernels",
]
