"""fairseq's monotonic-attention entry point, exact and differentiable.

``expected_alignment_from_p_choose`` has the signature, argument layout and padding
semantics of fairseq's ``examples/simultaneous_translation/utils/monotonic_attention.py``
(``p_choose`` ``[bsz, tgt_len, src_len]``, where fairseq's monotonic multi-head attention
folds its heads into bsz, and ``padding_mask`` ``[bsz, src_len]`` over the same first
dimension, True at padded source positions, left or right padding alike), so a fairseq model
can import it in place of fairseq's. The differences:

* It computes the recurrence of 002 eqs. 13-14 (mona's kernel), exact for any source
  length. fairseq's kernels (``alignment_train_cpu`` / ``_cuda``) evaluate the closed form
  ``alpha_i = p_i * cp_i * cumsum(alpha_{i-1} / clamp(cp_i, eps, 1))`` with ``cp_i`` the
  exclusive cumulative product of ``1 - p_i`` (002 eq. 30), whose clamped division is wrong
  as soon as ``cp_i`` falls below ``eps`` along a row; see :func:`fairseq_closed_form` and
  the measured table below.
* It has a backward pass (mona's analytic one), where fairseq's kernels have none
  (fairseq issue 4270: no gradient reaches ``p_choose``).
* CPU tensors only (mona's kernels run on the CPU); float16 / bfloat16 inputs are computed
  in float32 and cast back, as fairseq does.

Measured by ``bench/python/fairseq_closed_form.py`` (``[32, 8, src_len]``, seed 0; the
closed form in float32 as fairseq computes it, against this function in float64; "rows"
are the (b, i) whose largest error exceeds 1e-3; full table in ``docs/python.md``):

    max |alpha_fairseq - alpha_exact| at src_len =
    p_choose                     8            16        32      64      500
    sigmoid(N(-2, 2^2))          6.6e-08      9.6e-08   0.13    0.31    0.098 (45% of rows)
    U(0, 1)                      0.085        0.18      0.2     0.17    0.22  (48% of rows)
    90% near 0, 10% confident    1.1e-05      9.6e-05   0.76    0.99    1     (70% of rows)

The closed form is accurate while every exclusive cumprod stays above eps; a row with a
few confident ``p`` (cp_i underflowing eps) breaks it, which long source sequences make
almost certain.
"""

from typing import Optional

import torch
from torch import Tensor

from .. import functional as F
from .._C import ArgumentError

__all__ = ["expected_alignment_from_p_choose", "fairseq_closed_form"]


def _check(p_choose: Tensor, padding_mask: Optional[Tensor], fn: str) -> None:
    if not isinstance(p_choose, Tensor) or p_choose.dim() != 3:
        shape = list(p_choose.shape) if isinstance(p_choose, Tensor) else type(p_choose).__name__
        raise ArgumentError(f"{fn}: p_choose: expected 3 dims [bsz, tgt_len, src_len], got {shape}")
    if padding_mask is not None:
        bsz, _, src_len = p_choose.shape
        if not isinstance(padding_mask, Tensor):
            raise ArgumentError(f"{fn}: padding_mask: expected a bool tensor [bsz, src_len] or None, "
                                f"got {type(padding_mask).__name__}")
        if padding_mask.shape != (bsz, src_len):
            raise ArgumentError(
                f"{fn}: padding_mask: expected sizes [bsz, src_len] = [{bsz}, {src_len}], "
                f"got {list(padding_mask.shape)}")


def expected_alignment_from_p_choose(p_choose: Tensor, padding_mask: Optional[Tensor] = None,
                                     eps: float = 1e-6) -> Tensor:
    """Expected alignment of hard monotonic attention, fairseq's interface (see the module).

    Args:
        p_choose: ``[bsz, tgt_len, src_len]`` (heads folded into bsz, as fairseq does)
            selection probabilities in [0, 1]; float32 or float64 are computed in their own
            dtype, float16 / bfloat16 in float32.
        padding_mask: optional ``[bsz, src_len]`` bool, True at padding (any position).
            Padded entries get p = 0, so the alignment passes over them: alpha is exactly 0
            there and the gradient of p_choose there is 0.
        eps: accepted for compatibility and unused: the recurrence divides by nothing.

    Returns:
        alpha ``[bsz, tgt_len, src_len]`` in the dtype of p_choose, differentiable in
        p_choose (002 eqs. 13-14, initial alignment on source position 0).

    Raises:
        mona.ArgumentError (ValueError): p_choose not 3-d, padding_mask of the wrong shape,
            p outside [0, 1] or NaN, a non-CPU tensor.
    """
    fn = "mona.compat.fairseq.expected_alignment_from_p_choose"
    _check(p_choose, padding_mask, fn)
    dtype = p_choose.dtype
    p = p_choose if dtype in (torch.float32, torch.float64) else p_choose.float()
    if padding_mask is not None:
        p = p.masked_fill(padding_mask.to(torch.bool).unsqueeze(1), 0.0)
    return F.monotonic_alignment(p).to(dtype)


def fairseq_closed_form(p_choose: Tensor, padding_mask: Optional[Tensor] = None,
                        eps: float = 1e-6) -> Tensor:
    """What fairseq's ``alignment_train_cpu`` computes, restated in torch operations for
    comparisons (forward only, like fairseq's kernel): per target step i, with ``cp_i`` the
    exclusive cumulative product of ``1 - p_i`` along the source,
    ``alpha_i = clamp(p_i * cp_i * cumsum(alpha_{i-1} / clamp(cp_i, eps, 1)), 0, 1)``,
    ``alpha_{-1}`` = all mass on source position 0, computed in float32 whatever p_choose's
    dtype (fairseq converts p_choose to float32 before its kernel), the result cast back to
    p_choose's dtype.
    """
    _check(p_choose, padding_mask, "mona.compat.fairseq.fairseq_closed_form")
    p = p_choose.float()
    if padding_mask is not None:
        p = p.masked_fill(padding_mask.to(torch.bool).unsqueeze(1), 0.0)
    one_minus = 1 - p
    cp = torch.cat([torch.ones_like(p[:, :, :1]), torch.cumprod(one_minus, dim=2)[:, :, :-1]], dim=2)
    cp_clamped = cp.clamp(eps, 1.0)
    prev = torch.zeros_like(p[:, 0])
    prev[:, 0] = 1
    rows = []
    for i in range(p.shape[1]):
        a = (p[:, i] * cp[:, i] * torch.cumsum(prev / cp_clamped[:, i], dim=1)).clamp(0, 1)
        rows.append(a)
        prev = a
    return torch.stack(rows, dim=1).to(p_choose.dtype)
