# mona.compat.fairseq.expected_alignment_from_p_choose: fairseq's layout and padding, the
# exact recurrence, a real backward pass; fairseq's clamped closed form (restated in
# fairseq_closed_form) agrees on short inputs and fails on long ones.
import torch
from torch.autograd import gradcheck

import mona
from mona.compat.fairseq import expected_alignment_from_p_choose, fairseq_closed_form
from conftest import random_p

D = torch.float64


def recurrence(p):
    """002 eqs. 13-14 by plain Python loops in float64, alpha_{-1} = delta at 0."""
    B, U, T = p.shape
    out = torch.zeros(B, U, T, dtype=D)
    pl = p.double().tolist()
    for b in range(B):
        prev = [1.0] + [0.0] * (T - 1)
        for i in range(U):
            q, row = 0.0, []
            for j in range(T):
                q = (1 - pl[b][i][j - 1]) * q + prev[j] if j else prev[0]
                row.append(pl[b][i][j] * q)
            out[b, i] = torch.tensor(row, dtype=D)
            prev = row
    return out


def test_short_inputs_agree_with_fairseqs_closed_form():
    # T = 12, p <= 0.3: every exclusive cumprod of 1 - p stays >= 0.7^11 = 2e-2 > eps = 1e-6,
    # where the closed form is exact in exact arithmetic
    p = random_p((4, 5, 12), low=0.0, high=0.3)
    mask = torch.zeros(4, 12, dtype=torch.bool)
    mask[1, 9:] = True   # right padding
    mask[2, :3] = True   # left padding (fairseq's default for sources)
    for dtype, atol in [(D, 1e-6), (torch.float32, 1e-6)]:
        # The closed form runs in float32 for either dtype, as fairseq's kernel does: its
        # cumsum of ratios up to 1/2e-2 = 50 times entries <= 1 rounds at 50 * 6e-8 = 3e-6
        # relative to the ratio, times cp <= 1: ~3e-7 absolute, 1e-6 bounds it (mona's
        # float64 result is exact to 1e-14 beside that)
        mine = expected_alignment_from_p_choose(p.to(dtype), mask)
        theirs = fairseq_closed_form(p.to(dtype), mask)
        assert mine.dtype == dtype
        torch.testing.assert_close(mine.double(), theirs.double(), rtol=0, atol=atol)


def test_long_inputs_exact_where_the_closed_form_fails():
    # T = 300 with a few confident p per row: the cumprod drops below eps and the closed
    # form's rows go wrong by O(1); mona's equals the recurrence to float64 rounding
    g = torch.Generator().manual_seed(1)
    hard = torch.rand(2, 6, 300, generator=g, dtype=D) < 0.9
    p = torch.where(hard, torch.sigmoid(-12 + 2 * torch.randn(2, 6, 300, generator=g, dtype=D)),
                    torch.sigmoid(4 + 2 * torch.randn(2, 6, 300, generator=g, dtype=D)))
    exact = recurrence(p)
    mine = expected_alignment_from_p_choose(p)
    # the same recurrence, entry by entry: coefficients in [0, 1], 300 steps of one rounding
    # each relative to values <= 1 -> < 300 * 1.1e-16
    torch.testing.assert_close(mine, exact, rtol=0, atol=1e-13)
    err = (fairseq_closed_form(p) - exact).abs().max()
    assert err > 0.5, f"fairseq's closed form was expected to fail here, max error {err}"


def test_padding_semantics_and_gradient():
    p = random_p((3, 4, 9)).requires_grad_(True)
    mask = torch.zeros(3, 9, dtype=torch.bool)
    mask[0, 6:] = True
    mask[1, :2] = True
    alpha = expected_alignment_from_p_choose(p, mask)
    assert torch.all(alpha.detach()[mask.unsqueeze(1).expand_as(alpha)] == 0)
    # left padding of 2 is the unpadded problem shifted by 2 (p = 0 passes the mass on)
    shifted = expected_alignment_from_p_choose(p.detach()[1:2, :, 2:])
    torch.testing.assert_close(alpha.detach()[1:2, :, 2:], shifted, rtol=0, atol=1e-15)
    # right padding is the unpadded problem on the first 6 entries
    torch.testing.assert_close(alpha.detach()[0:1, :, :6],
                               expected_alignment_from_p_choose(p.detach()[0:1, :, :6]),
                               rtol=0, atol=1e-15)
    # a real backward pass (fairseq's kernels have none), zero at padding
    g, = torch.autograd.grad((alpha * torch.randn_like(alpha)).sum(), p)
    assert torch.all(g[mask.unsqueeze(1).expand_as(g)] == 0)
    assert gradcheck(lambda p: expected_alignment_from_p_choose(p, mask), (p,))


def test_half_precision_and_errors():
    p = random_p((2, 3, 5), dtype=torch.float16)
    a = expected_alignment_from_p_choose(p)
    assert a.dtype == torch.float16
    # Computed in float32 and rounded to float16 once: alpha <= 1, so the rounding is at most
    # half a float16 ulp below 1 (2^-12 = 2.4e-4); float32's own error (~1e-7) is far below.
    torch.testing.assert_close(a.double(), recurrence(p.double()), rtol=0, atol=2.5e-4)
    try:
        expected_alignment_from_p_choose(torch.rand(2, 3, 5), torch.zeros(2, 4, dtype=torch.bool))
    except mona.ArgumentError as e:
        assert "padding_mask: expected sizes [bsz, src_len] = [2, 5], got [2, 4]" in str(e)
    else:
        raise AssertionError("no error for a padding mask of the wrong shape")
