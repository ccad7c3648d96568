# The operators through mona.functional: gradients (torch.autograd.gradcheck in float64,
# every differentiable op), float32 against float64, lengths and padding.
#
# gradcheck compares mona's analytic backward passes with central finite differences
# (step 1e-6) in float64: its default tolerances (atol 1e-5, rtol 1e-3) are far above the
# O(1e-10) truncation and rounding error of differences of these smooth functions at that
# step, so a wrong gradient entry fails and a right one cannot.
import math

import pytest
import torch
from torch.autograd import gradcheck

import mona
import mona.functional as F
from conftest import lengths_mask, random_p

D = torch.float64
IN = torch.tensor([7, 4, 6])   # in_lens of a [3, U, 7] batch
OUT = torch.tensor([4, 2, 3])  # out_lens of a [3, 4, T] batch


def leaf(t):
    return t.detach().clone().requires_grad_(True)


# ---- gradcheck, float64 --------------------------------------------------------------

def test_gradcheck_monotonic_alignment():
    p = leaf(random_p((3, 4, 7)))
    alpha0 = leaf(torch.rand(3, 7, dtype=D) + 0.1)
    assert gradcheck(lambda p, a0: F.monotonic_alignment(p, IN, OUT, a0), (p, alpha0))
    assert gradcheck(lambda p: F.monotonic_alignment(p), (p,))


def test_gradcheck_monotonic_alignment_step():
    p = leaf(random_p((3, 7)))
    prev = leaf(torch.rand(3, 7, dtype=D))
    assert gradcheck(lambda p, a: F.monotonic_alignment_step(p, a, IN), (p, prev))


@pytest.mark.parametrize("w", [1, 3])
def test_gradcheck_mocha_chunkwise(w):
    alpha = leaf(F.monotonic_alignment(random_p((3, 4, 7))))
    u = leaf(torch.randn(3, 4, 7, dtype=D))
    assert gradcheck(lambda a, u: F.mocha_chunkwise(a, u, w, IN, OUT), (alpha, u))


def test_gradcheck_matcha_chunkwise():
    prev = leaf(torch.rand(3, 4, 7, dtype=D))
    p = leaf(random_p((3, 4, 7), seed=1))
    u = leaf(torch.randn(3, 4, 7, dtype=D))
    assert gradcheck(lambda a, p, u: F.matcha_chunkwise(a, p, u, IN, OUT), (prev, p, u))


def test_gradcheck_masked_softmax():
    e = leaf(torch.randn(3, 4, 7, dtype=D))
    assert gradcheck(lambda e: F.masked_softmax(e, IN, OUT), (e,))


def test_gradcheck_additive_energy_and_attention_context():
    q, k, w = leaf(torch.randn(3, 4, 5, dtype=D)), leaf(torch.randn(3, 7, 5, dtype=D)), leaf(torch.randn(5, dtype=D))
    assert gradcheck(F.additive_energy, (q, k, w))
    # one decoder step: a query [B, d], the forward's e [B, 1, T] and a backward to match
    assert gradcheck(F.additive_energy, (leaf(torch.randn(3, 5, dtype=D)), k, w))
    weights, values = leaf(torch.rand(3, 7, dtype=D)), leaf(torch.randn(3, 7, 6, dtype=D))
    assert gradcheck(F.attention_context, (weights, values))


@pytest.mark.parametrize("rule", ["none", "fixed", "adaptive"])
def test_gradcheck_monotonic_attention_step(rule):
    e, u = leaf(torch.randn(3, 1, 7, dtype=D)), leaf(torch.randn(3, 7, dtype=D))
    prev, values = leaf(torch.rand(3, 7, dtype=D)), leaf(torch.randn(3, 7, 4, dtype=D))
    noise = torch.randn(3, 1, 7, dtype=D)

    def step(e, prev, values, u):
        s = F.monotonic_attention_step(e, prev, values, u if rule != "none" else None, rule, 3, noise, 0.5, IN)
        return s.alpha, s.weights, s.context
    assert gradcheck(step, (e, prev, values, u))


def test_monotonic_attention_step_is_its_composition():
    # The one operator against the functions it fuses, composed in Python (each tested
    # above), float64, with noise and lengths: the same kernels, so the same values up to
    # the sigmoid (torch's against std::exp) and the order of a few sums: 1e-13.
    torch.manual_seed(6)
    e, u = leaf(torch.randn(3, 7, dtype=D)), leaf(torch.randn(3, 7, dtype=D))
    prev, values = leaf(torch.rand(3, 7, dtype=D)), leaf(torch.randn(3, 7, 4, dtype=D))
    noise = torch.randn(3, 7, dtype=D)
    for rule in ["none", "fixed", "adaptive"]:
        s = F.monotonic_attention_step(e, prev, values, u if rule != "none" else None, rule, 2, noise, 1.5, IN)
        p = torch.sigmoid(e + 1.5 * noise)
        alpha = F.monotonic_alignment_step(p, prev, IN)
        weights = {"none": alpha,
                   "fixed": F.mocha_chunkwise(alpha.unsqueeze(1), u.unsqueeze(1), 2, IN)[:, 0],
                   "adaptive": F.matcha_chunkwise(prev.unsqueeze(1), p.unsqueeze(1), u.unsqueeze(1), IN)[:, 0]}[rule]
        context = F.attention_context(weights, values)
        for got, want in [(s.alpha, alpha), (s.weights, weights), (s.context, context)]:
            torch.testing.assert_close(got, want, rtol=0, atol=1e-13)
        g = [torch.randn_like(t) for t in (alpha, weights, context)]
        inputs = (e, prev, values) + ((u,) if rule != "none" else ())
        got = torch.autograd.grad((s.alpha, s.weights, s.context), inputs, g)
        want = torch.autograd.grad((alpha, weights, context), inputs, g)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-13)
    with pytest.raises(mona.ArgumentError, match="rule: expected 'none' .* got 'chunky'"):
        F.monotonic_attention_step(e, prev, values, u, "chunky")
    with pytest.raises(mona.ArgumentError, match="chunk_energy: expected \\[B, T\\] = \\[3, 7\\] under a chunk rule"):
        F.monotonic_attention_step(e, prev, values, None, "fixed", 2)


def gmm_inputs(H=2):
    mu = leaf(torch.tensor([1.0, 2.5, 4.0, 5.5], dtype=D).view(1, 4, 1).expand(3, 4, H)
              + 0.3 * torch.randn(3, 4, H, dtype=D))
    var = leaf(0.5 + torch.rand(3, 4, H, dtype=D))
    w = leaf(torch.softmax(torch.randn(3, 4, H, dtype=D), -1))
    delta = leaf(0.5 + 0.5 * torch.rand(3, 7, dtype=D))
    nu = leaf(delta.detach().cumsum(1))
    return mu, var, w, nu, delta


@pytest.mark.parametrize("window", ["none", "adaptive", "fixed"])
def test_gradcheck_gmm_attention_weights(window):
    mu, var, w, nu, delta = gmm_inputs()
    fn = lambda mu, v, w, nu, d: F.gmm_attention_weights(  # noqa: E731
        mu, v, w, nu, d, window=window, radius=2.0, width=3, in_lens=IN, out_lens=OUT)
    assert gradcheck(fn, (mu, var, w, nu, delta))
    # defaults: w = 1, nu_j = j + 1, delta_j = 1, T from in_lens
    assert gradcheck(lambda mu, v: F.gmm_attention_weights(mu, v, in_lens=IN), (mu, var))


def test_gradcheck_gmm_length_penalty():
    mu, _, _, nu, _ = gmm_inputs()
    assert gradcheck(lambda mu, nu: F.gmm_length_penalty(mu, nu, 5e-4, IN, OUT), (mu, nu))


K = torch.tensor([3, 0, 4])


def test_gradcheck_poisson_binomial_log_prob():
    x = leaf(torch.randn(3, 7, dtype=D))
    assert gradcheck(lambda x: F.poisson_binomial_log_prob(x, K, IN), (x,))


def fixed_b():
    b = torch.zeros(3, 7, dtype=D)
    b[0, [1, 2, 5]] = 1
    b[2, [0, 3, 4, 5]] = 1
    return b


def test_gradcheck_cb_log_prob_and_steps():
    x = leaf(torch.randn(3, 7, dtype=D))
    b = fixed_b()
    assert gradcheck(lambda x: F.cb_log_prob(x, b, IN), (x,))
    assert gradcheck(lambda x: F.cb_idb_step_log_probs(x, b, IN), (x,))
    assert gradcheck(lambda x: F.cb_bb_step_log_probs(x, b, IN), (x,))
    order = mona.cb_sample(x.detach(), K, "db", seed=3, in_lens=IN).positions
    assert gradcheck(lambda x: F.cb_db_step_log_probs(x, order, K, IN), (x,))


def test_gradcheck_cb_log_table():
    x = leaf(torch.randn(3, 7, dtype=D))
    # infeasible entries are -inf whatever the logits: compare the finite ones
    fn = lambda x: (lambda q: torch.where(torch.isfinite(q), q, torch.zeros_like(q)))(  # noqa: E731
        F.cb_log_table(x, K, IN))
    assert gradcheck(fn, (x,))


def test_cb_log_table_backward_refuses_non_finite_seeds_where_the_table_is_finite():
    # A NaN or inf seed at a finite entry of the valid region is an error, as for the
    # other operators (it was zeroed, and training went on with a zero gradient); seeds at
    # -inf (infeasible) entries and in the padding rows are ignored.
    for bad in (float("nan"), float("inf")):
        x = leaf(torch.tensor([[0.3, -1.0, 2.0]], dtype=D))
        q = F.cb_log_table(x, torch.tensor([1]))
        seed = torch.zeros_like(q)
        seed[0, 0, 1] = bad
        with pytest.raises(RuntimeError, match="grad_table: expected finite values"):
            q.backward(seed)
    x = leaf(torch.tensor([[0.3, -1.0, 2.0, 9.0]], dtype=D))
    q = F.cb_log_table(x, torch.tensor([1]), torch.tensor([3]))
    seed = torch.zeros_like(q)
    seed[0, 0, 0] = 1.0
    (clean,) = torch.autograd.grad(q, x, seed, retain_graph=True)
    seed[torch.isinf(q)] = float("nan")
    seed[0, 3:, :] = float("nan")  # the row past the length and the padding row
    (noisy,) = torch.autograd.grad(q, x, seed)
    assert torch.equal(clean, noisy) and torch.isfinite(noisy).all()


def test_non_finite_logits_are_named_by_the_function_called():
    x = torch.tensor([[0.0, float("nan"), 0.0]], dtype=D)
    k = torch.tensor([1])
    b = torch.tensor([[1.0, 0.0, 0.0]], dtype=D)
    calls = {
        "mona::nn::cb_marginals": lambda: F.cb_marginals(x, k),
        "mona::nn::cb_log_table": lambda: F.cb_log_table(x, k),
        "mona::nn::cb_log_prob": lambda: F.cb_log_prob(x, b),
        "mona::nn::cb_idb_step_log_probs": lambda: F.cb_idb_step_log_probs(x, b),
        "mona::nn::cb_sample_bb": lambda: mona.cb_sample(x, k, "bb", seed=1),
    }
    for name, call in calls.items():
        with pytest.raises(mona.ArgumentError, match=name + r": logits: expected finite values, got nan at \[0, 1\]"):
            call()
    # NaN past a row's length is padding: not read
    m = F.cb_marginals(torch.tensor([[0.0, 0.0, float("nan")]], dtype=D), k, torch.tensor([2]))
    assert torch.equal(m, torch.tensor([[0.5, 0.5, 0.0]], dtype=D))


def test_gradcheck_cb_marginal_log_likelihood():
    x = leaf(torch.randn(3, 7, dtype=D))
    log_emit = leaf(torch.log_softmax(torch.randn(3, 4, 7, dtype=D), dim=1))
    fn = lambda x, e: F.cb_marginal_log_likelihood(x, e, IN, torch.tensor([4, 2, 3]))  # noqa: E731
    assert gradcheck(fn, (x, log_emit))


@pytest.mark.parametrize("sampler", ["idb", "bb", "db"])
def test_cb_samplers(sampler):
    x = leaf(torch.randn(3, 7, dtype=D))
    s = mona.cb_sample(x, K, sampler, seed=5, in_lens=IN)
    valid = lengths_mask(IN, 7)
    assert torch.equal(s.b.sum(1), K.to(D))                       # exactly k highs
    assert torch.all(s.b[~valid] == 0)                              # none in padding
    again = mona.cb_sample(x, K, sampler, seed=5, in_lens=IN)
    assert torch.equal(s.b, again.b)                                # the seed fixes the draw
    total = s.step_log_probs.sum(1)
    ref = F.cb_log_prob(x, s.b, IN)
    if sampler == "db":   # the DB steps factor the ordered draft: log P(set | k) - log k!
        ref = ref - torch.lgamma(K.to(D) + 1)
    # one log-probability factored two ways, each a sum of <= 7 terms of size < 10:
    # float64 rounding < 1e-13
    torch.testing.assert_close(total, ref, rtol=0, atol=1e-12)
    g1, = torch.autograd.grad(total.sum(), x)
    g2, = torch.autograd.grad(ref.sum(), x)
    torch.testing.assert_close(g1, g2, rtol=0, atol=1e-12)
    # gradcheck of the step log-probabilities of the draw (the draw itself is fixed by the
    # seed; a perturbation of 1e-6 would change it only if a uniform fell that close to a
    # threshold, which these seeds do not)
    assert gradcheck(lambda x: mona.cb_sample(x, K, sampler, seed=5, in_lens=IN).step_log_probs, (x,))
    if sampler == "bb":   # positions: the highs in increasing order
        for r in range(3):
            assert s.positions[r, :K[r]].tolist() == torch.nonzero(s.b[r]).flatten().tolist()
    if sampler == "idb":
        assert s.positions.shape == (3, 0)


def test_cb_marginals_sum_to_k():
    x = torch.randn(3, 7, dtype=D)
    m = F.cb_marginals(x, K, IN)
    torch.testing.assert_close(m.sum(1), K.to(D), rtol=0, atol=1e-12)
    assert torch.all(m[~lengths_mask(IN, 7)] == 0)


# ---- float32 against float64 -----------------------------------------------------------
#
# Both dtypes get the same (float32-representable) inputs, so the difference is the float32
# kernels' own rounding. The alignment recursions combine at most U * T = 28 terms in [0, 1]
# per entry with coefficients in [0, 1]: each step adds at most a few float32 roundings
# (eps = 6e-8) relative to quantities <= 1, so 1e-5 absolute is a wide bound that a wrong
# float32 path (a float32 accumulation of a different formula) would still fail. The
# Poisson-binomial and CB functions compute in double for both dtypes and round once:
# their float32 outputs are the float64 ones rounded, within 1 float32 ulp (rtol 2^-23).

def f32_cases():
    p = random_p((3, 4, 7), dtype=torch.float32)
    u = torch.randn(3, 4, 7)
    alpha = F.monotonic_alignment(p)
    mu, var, w, nu, delta = (t.detach().float() for t in gmm_inputs())
    x = torch.randn(3, 7)
    log_emit = torch.log_softmax(torch.randn(3, 4, 7), dim=1)
    b = fixed_b().float()
    return {
        "monotonic_alignment": (lambda p: F.monotonic_alignment(p, IN, OUT), (p,), 1e-5),
        "monotonic_alignment_step": (lambda p, a: F.monotonic_alignment_step(p, a, IN),
                                     (p[:, 0], alpha[:, 0]), 1e-5),
        "mocha_chunkwise": (lambda a, u: F.mocha_chunkwise(a, u, 3, IN, OUT), (alpha, u), 1e-5),
        "matcha_chunkwise": (lambda a, p, u: F.matcha_chunkwise(a, p, u, IN, OUT),
                             (alpha, p, u), 1e-5),
        "masked_softmax": (lambda e: F.masked_softmax(e, IN, OUT), (u,), 1e-6),
        # sums of 5 products w[k] tanh(.) with |w| < 4: a few float32 ulp of 20
        "additive_energy": (F.additive_energy, (u[:, :, :5], u[:, :3, 2:], u[0, 0, :5]), 1e-5),
        "attention_context": (F.attention_context, (alpha[:, 0], u.transpose(1, 2)), 1e-6),
        "gmm_attention_weights": (lambda mu, v, w, nu, d: F.gmm_attention_weights(
            mu, v, w, nu, d, "adaptive", 2.0, 4, IN, OUT), (mu, var, w, nu, delta), 1e-5),
        "poisson_binomial_log_prob": (lambda x: F.poisson_binomial_log_prob(x, K, IN), (x,), None),
        "cb_log_prob": (lambda x: F.cb_log_prob(x, b.to(x.dtype), IN), (x,), None),
        "cb_marginal_log_likelihood": (lambda x, e: F.cb_marginal_log_likelihood(x, e, IN),
                                       (x, log_emit), None),
    }


@pytest.mark.parametrize("name", list(f32_cases()))
def test_float32_against_float64(name):
    fn, args, atol = f32_cases()[name]
    a32 = [leaf(a) for a in args]
    a64 = [leaf(a.double()) for a in args]
    y32, y64 = fn(*a32), fn(*a64)
    assert y32.dtype == torch.float32 and y64.dtype == torch.float64
    if atol is None:  # computed in double, rounded once
        torch.testing.assert_close(y32, y64.float(), rtol=2 ** -23, atol=0)
    else:
        torch.testing.assert_close(y32.double(), y64, rtol=0, atol=atol)
    g = torch.randn(y64.shape, dtype=D)
    g32 = torch.autograd.grad(y32, a32, g.float())
    g64 = torch.autograd.grad(y64, a64, g)
    for x32, x64 in zip(g32, g64):
        # gradients: the same bound scaled by the size of the upstream gradient (|g| < 5)
        # and, for the CB functions, 1e-5 absolute for gradients of size O(1) that the
        # float32 input rounding does not enter (same inputs) but the float32 upstream
        # gradient's rounding does
        torch.testing.assert_close(x32.double(), x64, rtol=0, atol=5 * (atol or 2e-6))


# ---- lengths and padding ---------------------------------------------------------------

def test_padding_exactly_zero_and_batch_equals_single():
    p = leaf(random_p((3, 4, 7)))
    u = leaf(torch.randn(3, 4, 7, dtype=D))
    alpha = F.monotonic_alignment(p, IN, OUT)
    beta = F.mocha_chunkwise(alpha, u, 2, IN, OUT)
    valid = lengths_mask(OUT, 4).unsqueeze(2) & lengths_mask(IN, 7).unsqueeze(1)
    assert torch.all(alpha[~valid] == 0) and torch.all(beta[~valid] == 0)
    gp, gu = torch.autograd.grad((beta * torch.randn_like(beta)).sum(), (p, u))
    assert torch.all(gp[~valid] == 0) and torch.all(gu[~valid] == 0)
    # each row alone, unpadded, gives the batched row: the same recursion over the same
    # entries; float64, so only a different association of sums could differ (1e-15)
    for r in range(3):
        U, T = int(OUT[r]), int(IN[r])
        a1 = F.monotonic_alignment(p[r:r + 1, :U, :T])
        b1 = F.mocha_chunkwise(a1, u[r:r + 1, :U, :T], 2)
        torch.testing.assert_close(a1[0], alpha[r, :U, :T], rtol=0, atol=1e-15)
        torch.testing.assert_close(b1[0], beta[r, :U, :T], rtol=0, atol=1e-15)


def test_exact_recurrence_and_empty_inputs():
    # against the recurrence written out (002 eqs. 13-14) in plain Python
    p = random_p((1, 3, 6))
    alpha = F.monotonic_alignment(p)[0]
    prev = [1.0] + [0.0] * 5
    for i in range(3):
        q, row = 0.0, []
        for j in range(6):
            q = (1 - float(p[0, i, j - 1])) * q + prev[j] if j else prev[0]
            row.append(float(p[0, i, j]) * q)
        assert max(abs(a - b) for a, b in zip(row, alpha[i].tolist())) < 1e-15
        prev = row
    # zero lengths: all-zero outputs, never NaN
    z = F.monotonic_alignment(p, torch.tensor([0]), torch.tensor([3]))
    assert torch.all(z == 0)
    assert F.monotonic_alignment(torch.zeros(0, 3, 4, dtype=D)).shape == (0, 3, 4)


# ---- the fused energy and context --------------------------------------------------------

def test_fused_energy_and_context_equal_the_torch_formulas():
    # against the formulas in torch operations (independent of mona's kernels), float64:
    # mona's tanh is within a few ulp of 1 (include/mona/core/additive_energy.h), so an
    # energy is within a few ulp of sum_k |w[k]| (< 1e-13 here); the context is the same
    # sums as bmm's in another order (1e-14 for 7 terms of size < 4)
    torch.manual_seed(5)
    q, k, w = torch.randn(3, 4, 6, dtype=D), torch.randn(3, 9, 6, dtype=D), torch.randn(6, dtype=D)
    e = F.additive_energy(q, k, w)
    torch.testing.assert_close(e, torch.tanh(q.unsqueeze(2) + k.unsqueeze(1)) @ w, rtol=0, atol=1e-13)
    weights, values = torch.rand(3, 7, dtype=D), torch.randn(3, 7, 5, dtype=D)
    weights[1, 4:] = 0  # padding: its values must not reach the context, even non-finite ones
    values[1, 4:] = float("nan")
    c = F.attention_context(weights, values)
    ref = torch.bmm(weights.unsqueeze(1), values.nan_to_num()).squeeze(1)
    torch.testing.assert_close(c, ref, rtol=0, atol=1e-14)


def test_fused_energy_computes_only_the_gradients_asked_for():
    q, k, w = leaf(torch.randn(2, 3, 4, dtype=D)), torch.randn(2, 5, 4, dtype=D), leaf(torch.randn(4, dtype=D))
    g = torch.randn(2, 3, 5, dtype=D)
    gq, gw = torch.autograd.grad(F.additive_energy(q, k, w), (q, w), g)
    q, w = q.detach(), w.detach()  # the backward operator itself is first order only
    gq_all, gk_all, gw_all = torch.ops.mona.additive_energy_backward(g, q, k, w, [True, True, True])
    assert torch.equal(gq, gq_all) and torch.equal(gw, gw_all) and gk_all.shape == k.shape
    none = torch.ops.mona.additive_energy_backward(g, q, k, w, [True, False, False])
    assert none[1] is None and none[2] is None and torch.equal(none[0], gq_all)
    gw_c, gv_c = torch.ops.mona.attention_context_backward(
        torch.randn(2, 4, dtype=D), torch.rand(2, 5, dtype=D), k, [False, True])
    assert gw_c is None and gv_c.shape == k.shape


def test_double_backward_raises_instead_of_dropping_terms():
    p = leaf(random_p((2, 3, 5)))
    alpha = F.monotonic_alignment(p)
    # create_graph=True would need the backward of the backward pass: refused, not wrong
    with pytest.raises(NotImplementedError, match="first order"):
        torch.autograd.grad(alpha.pow(2).sum(), p, create_graph=True)
    g, = torch.autograd.grad(alpha.pow(2).sum(), p)  # first order as usual
    assert g.shape == p.shape
    # The operators registered through mona::nn's own nodes (registration B) refuse it too.
    logits = leaf(torch.randn(2, 5, dtype=D))
    lp = F.poisson_binomial_log_prob(logits, torch.tensor([1, 2]))
    with pytest.raises(NotImplementedError,
                       match="mona::nn::poisson_binomial_log_prob: mona's backward passes are first order"):
        torch.autograd.grad(lp.pow(2).sum(), logits, create_graph=True)
    g, = torch.autograd.grad(lp.pow(2).sum(), logits)
    assert g.shape == logits.shape


def test_inference_mode_runs_the_cpu_kernels():
    p = random_p((2, 3, 5))
    with torch.inference_mode():
        a = F.monotonic_alignment(p)
        lp = F.poisson_binomial_log_prob(torch.randn(2, 5, dtype=D), torch.tensor([1, 2]))
    assert torch.equal(a, F.monotonic_alignment(p))
    assert lp.shape == (2,) and torch.all(torch.isfinite(lp))
    assert math.isfinite(float(a.sum()))


def test_inputs_changed_in_place_after_forward_are_refused():
    # alpha0 and the lengths are saved like every other input: a change between forward and
    # backward used to give another gradient silently (autograd's error now, as for p).
    p = torch.rand(2, 3, 5, dtype=torch.float64, requires_grad=True)
    alpha0 = torch.rand(2, 5, dtype=torch.float64)
    alpha = mona.monotonic_alignment(p, alpha0=alpha0)
    alpha0.mul_(3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        alpha.sum().backward()
    lens = torch.tensor([5, 3])
    alpha = mona.monotonic_alignment(p, lens)
    lens[1] = 4
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        alpha.sum().backward()
    # mona::nn's nodes (GMM, Poisson-binomial, conditional Bernoulli) check their lengths too.
    mu = (3 * torch.rand(2, 3, 1, dtype=torch.float64)).requires_grad_()
    lens = torch.tensor([5, 4])
    w = mona.functional.gmm_attention_weights(mu, torch.ones(2, 3, 1, dtype=torch.float64), in_lens=lens)
    lens[0] = 3
    with pytest.raises(RuntimeError, match="in_lens was modified in place after the forward pass"):
        w.sum().backward()
    # Lengths made in inference mode are taken (no version counter; nothing can change them).
    with torch.inference_mode():
        lens = torch.tensor([5, 3])
    mona.monotonic_alignment(p, lens).sum().backward()
    assert torch.all(p.grad[1, :, 3:] == 0)
