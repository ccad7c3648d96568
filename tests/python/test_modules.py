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


# Step-by-step decoding (prepare, initial_state, step) against the whole-sequence forward with
# the same queries: other operators (monotonic_alignment_step row by row against
# monotonic_alignment, attention_context against bmm, the chunkwise functions on one row), the
# same values. float64: the recurrences and sums differ only in association, 1e-12 for
# outputs of size < 10; gradients the same way, 1e-10.
STEPWISE = MODULES + [
    lambda q, m: mona.nn.GmmAttention(q, m, num_heads=2),
    lambda q, m: mona.nn.GmmAttention(q, m, num_heads=2, source_aware=True, window="adaptive"),
    lambda q, m: mona.nn.GmmAttention(q, m, num_heads=1, source_aware=True, window="fixed")]


@pytest.mark.parametrize("cls", STEPWISE)
def test_steps_equal_the_whole_sequence(cls):
    torch.manual_seed(4)
    att = cls(5, 6).double().eval()  # eval: no pre-sigmoid noise
    B, U, T = 3, 4, 9
    q = torch.randn(B, U, 5, dtype=torch.float64)
    h = torch.randn(B, T, 6, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([9, 5, 7])
    ctx, w = att(q, h, lens)
    memory = att.prepare(h, lens)
    state = att.initial_state(memory)
    step_ctx, step_w = [], []
    for i in range(U):
        c, wi, state = att.step(q[:, i], memory, state)
        step_ctx.append(c)
        step_w.append(wi)
    step_ctx, step_w = torch.stack(step_ctx, 1), torch.stack(step_w, 1)
    torch.testing.assert_close(step_w, w, rtol=0, atol=1e-12)
    torch.testing.assert_close(step_ctx, ctx, rtol=0, atol=1e-12)
    assert torch.all(step_w[1, :, 5:] == 0)
    g = torch.randn(B, U, 6, dtype=torch.float64)
    params = [h] + list(att.parameters())
    grads = torch.autograd.grad((ctx * g).sum(), params)
    step_grads = torch.autograd.grad((step_ctx * g).sum(), params)
    for a, b in zip(step_grads, grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


# The energy modules through the fused operator: the formula of 002 eq. 16 written out in
# torch operations (float64: mona's tanh within a few ulp, 1e-13 for d = 6), and the graph
# keeps no [B, U, T, d] tensor (the tanh values are recomputed in the backward pass): every
# tensor saved for backward is counted by a saved-tensors hook.
def test_energy_module_is_fused():
    torch.manual_seed(2)
    energy = mona.nn.MonotonicEnergy(5, 6, attention_dim=8).double()
    q = torch.randn(2, 3, 5, dtype=torch.float64)
    h = torch.randn(2, 7, 6, dtype=torch.float64, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        e = energy(q, h)
    w = energy.g * energy.v / energy.v.norm()
    ref = torch.tanh(energy.query_proj(q).unsqueeze(2) + energy.memory_proj(h).unsqueeze(1)) @ w + energy.r
    torch.testing.assert_close(e, ref, rtol=0, atol=1e-13)
    assert max(saved) < 2 * 3 * 7 * 8  # the largest saved tensor: the keys [2, 7, 8] or h
    (g_fused,) = torch.autograd.grad(e.sum(), h)
    (g_ref,) = torch.autograd.grad(ref.sum(), h)
    torch.testing.assert_close(g_fused, g_ref, rtol=0, atol=1e-12)


# GmmAttention against the mixture written out here (003 eqs. 7-12, no window): for each head
# h, w_h delta_j N(nu_j; mu_h, v_h), summed; float64, so agreement to 1e-12.
@pytest.mark.parametrize("source_aware", [False, True])
def test_gmm_module_equals_the_mixture_written_out(source_aware):
    torch.manual_seed(3)
    att = mona.nn.GmmAttention(5, 6, num_heads=3, source_aware=source_aware).double()
    q = torch.randn(2, 4, 5, dtype=torch.float64)
    h = torch.randn(2, 9, 6, dtype=torch.float64)
    ctx, w = att(q, h)
    raw = att.query_proj(q)
    # The module's options are the C++ GmmAttentionOptions' defaults: a step clamped to
    # max_step (003 sec. 2.3) and a variance floor min_variance.
    assert att.max_step == 3.0 and att.min_variance == 1e-4 and att.max_variance == 0.0
    step = torch.nn.functional.softplus(raw[..., :3]).clamp(0.0, att.max_step)
    var = torch.nn.functional.softplus(raw[..., 3:6]) + att.min_variance
    mix = torch.softmax(raw[..., 6:], -1)
    mu = torch.cumsum(step, 1)  # [B, U, H]
    if source_aware:
        delta = torch.sigmoid(att.position(h))  # [B, T, H]
    else:
        delta = torch.ones(2, 9, 3, dtype=torch.float64)
    nu = torch.cumsum(delta, 1) if source_aware else torch.arange(1, 10, dtype=torch.float64).view(1, 9, 1).expand(2, 9, 3)
    d = nu.unsqueeze(1) - mu.unsqueeze(2)  # [B, U, T, H]
    density = torch.exp(-d * d / (2 * var.unsqueeze(2))) / torch.sqrt(2 * torch.pi * var.unsqueeze(2))
    expected = (mix.unsqueeze(2) * delta.unsqueeze(1) * density).sum(-1)
    assert torch.allclose(w, expected, rtol=1e-12, atol=1e-12)
    assert torch.allclose(ctx, torch.bmm(expected, h), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("window", ["none", "adaptive", "fixed"])
def test_gmm_module_gradcheck_and_padding(window):
    torch.manual_seed(4)
    att = mona.nn.GmmAttention(4, 5, num_heads=2, source_aware=True, window=window).double()
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    h = torch.randn(2, 6, 5, dtype=torch.float64, requires_grad=True)
    lens = torch.tensor([6, 3])
    ctx, w = att(q, h, lens)
    assert torch.all(w[1, :, 3:] == 0)
    assert torch.autograd.gradcheck(lambda q_, h_: att(q_, h_, lens)[0], (q, h))
    ctx.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in att.parameters())


def test_gmm_module_errors_are_value_errors():
    with pytest.raises(ValueError, match="window must be none, adaptive or fixed, got 'sliding'"):
        mona.nn.GmmAttention(4, 5, window="sliding")


@pytest.mark.parametrize("ctor, message", [
    (lambda: mona.nn.MonotonicAttention(4, 5, noise_std=float("nan")),
     "MonotonicAttention: noise_std must be finite and >= 0, got nan"),
    (lambda: mona.nn.MochaAttention(4, 5, noise_std=-1), "MochaAttention: noise_std must be finite and >= 0, got -1"),
    (lambda: mona.nn.MochaAttention(4, 5, chunk_size=0), "MochaAttention: chunk_size w must be >= 1, got 0"),
    (lambda: mona.nn.MochaAttention(4, 5, chunk_size=2.5), "MochaAttention: chunk_size: expected an integer, got 2.5"),
    (lambda: mona.nn.SoftAttention(0, 5), "SoftAttention: query_dim must be > 0, got 0"),
    (lambda: mona.nn.GmmAttention(4, 5, num_heads=1.5), "GmmAttention: num_heads: expected an integer, got 1.5"),
    (lambda: mona.nn.GmmAttention(4, 5, min_variance=-0.5), "GmmAttention: gmm.min_variance must be finite and > 0"),
    (lambda: mona.nn.GmmAttention(4, 5, min_variance=1.0, max_variance=0.5),
     "GmmAttention: gmm.max_variance must be 0 \\(no clamp\\) or finite and > gmm.min_variance = 1, got 0.5"),
])
def test_module_options_are_checked_as_the_cpp_options(ctor, message):
    # The C++ AttentionOptions' checks, at construction: noise_std = nan used to train without
    # noise, min_variance < 0 to fail in some batches only.
    with pytest.raises(mona.ArgumentError, match=message):
        ctor()


def test_gmm_heads_errors_name_the_callers_lengths():
    # Each head is its own call: a length error names [B] and b, not the folded B * H.
    att = mona.nn.GmmAttention(4, 6, num_heads=2)
    q, h = torch.randn(2, 3, 4), torch.randn(2, 5, 6)
    with pytest.raises(ValueError, match=r"in_lens: expected shape \[B\] = \[2\], got \[1\]"):
        att(q, h, torch.tensor([5]))
    with pytest.raises(ValueError, match=r"in_lens\[1\] must lie in \[0, 5\], got 7"):
        att(q, h, torch.tensor([5, 7]))


@pytest.mark.parametrize("cls", STEPWISE)
def test_copies_and_pickles_leave_the_last_call_behind(cls):
    # last_alignment / last_mu keep the last call's graph (the length penalty needs last_mu's);
    # deepcopy (AveragedModel) refused non-leaf tensors, and torch.save pickled them.
    import copy
    import io
    att = cls(4, 6)
    att(torch.randn(2, 3, 4), torch.randn(2, 5, 6))[0].sum().backward()
    assert att.last_alignment.grad_fn is not None
    twin = copy.deepcopy(att)
    assert twin.last_alignment is None and getattr(twin, "last_mu", None) is None
    averaged = torch.optim.swa_utils.AveragedModel(att)  # a deepcopy inside
    for a, b in zip(averaged.module.parameters(), att.parameters()):
        assert torch.equal(a, b)
    buffer = io.BytesIO()
    torch.save(att, buffer)
    buffer.seek(0)
    assert torch.load(buffer).last_alignment is None
    assert att.last_alignment is not None  # the module itself keeps it


@pytest.mark.parametrize("cls", MODULES)
def test_empty_memory(cls):
    # T = 0: no entry to attend to, zero contexts (MAtChA and the step's initial state used to
    # index entry 0).
    att = cls(4, 6)
    ctx, w = att(torch.randn(2, 3, 4), torch.randn(2, 0, 6))
    assert ctx.shape == (2, 3, 6) and torch.all(ctx == 0) and w.shape == (2, 3, 0)
    memory = att.prepare(torch.randn(2, 0, 6))
    state = att.initial_state(memory)
    assert state is None or state.shape == (2, 0)


# Padding holds whatever the caller's batch holds (here NaN): the weights there are exactly 0,
# and the contexts are those of the same memory with zeros in its padding, as step() gives
# (attention_context skips weights of 0). torch.bmm alone made every context of the padded
# element NaN (0 * NaN).
@pytest.mark.parametrize("cls", STEPWISE)
def test_padding_values_do_not_reach_the_contexts(cls):
    torch.manual_seed(4)
    att = cls(4, 6).double().eval()
    q = torch.randn(2, 3, 4, dtype=torch.float64)
    h = torch.randn(2, 5, 6, dtype=torch.float64)
    lens = torch.tensor([5, 3])
    clean_ctx, clean_w = att(q, h, lens)
    h_nan = h.clone()
    h_nan[1, 3:] = float("nan")
    ctx, w = att(q, h_nan, lens)
    assert torch.isfinite(ctx).all()
    # The same inputs where it matters: equal to rounding of the same operations (exactly, here).
    torch.testing.assert_close(w, clean_w, rtol=0, atol=0)
    torch.testing.assert_close(ctx, clean_ctx, rtol=0, atol=0)
