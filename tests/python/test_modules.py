# mona.nn modules: shapes, masses, padding and gradients reaching every parameter.
import pytest
import torch

import mona

MODULES = [mona.nn.MonotonicAttention, mona.nn.MochaAttention, mona.nn.MatchaAttention,
           mona.nn.SoftAttention]


@pytest.mark.parametrize("cls", MODULES)
def test_module_forward_backward(cls):
    att = cls(5, 6).double()
    q = torch.randn(2, 3, 5, dtype=torch.float64)
    h = torch.randn(2, 7, 6, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([7, 4])
    ctx, w = att(q, h, lens)
    assert ctx.shape == (2, 3, 6) and w.shape == (2, 3, 7)
    assert torch.all(w[1, :, 4:] == 0)
    # attention weights are (sub-)probabilities: rows sum to at most 1 (to rounding)
    assert torch.all(w.sum(-1) <= 1 + 1e-12) and torch.all(w >= 0)
    ctx.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in att.parameters())
    att.eval()  # no noise: deterministic
    assert torch.equal(att(q, h, lens)[1], att(q, h, lens)[1])
