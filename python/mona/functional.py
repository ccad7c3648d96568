"""mona's differentiable functions over PyTorch tensors (the operators ``torch.ops.mona.*``).

Conventions (those of ``include/mona/nn/functional.h``):

* CPU tensors, dtype float32 or float64 (every tensor argument of one call in the same
  dtype); batch first. An alignment grid is ``[B, U, T]`` = [batch, out_len, in_len].
* ``in_lens`` / ``out_lens``: optional int64 (or int32) tensors ``[B]`` with the valid input
  lengths ``T_b <= T`` and output lengths ``U_b <= U``; ``None`` means full length. Entries
  past a length are exactly 0 in outputs and get exactly 0 gradient.
* Gradients are mona's analytic backward passes (``docs/math.md``), not autograd of a
  Python formula. Float32 results are the float32 kernels' (agreeing with float64 to
  rounding); the Poisson-binomial and conditional Bernoulli functions compute in double
  for both dtypes and round once.
* Errors: a bad argument (rank, sizes, dtype, device, lengths, values such as p outside
  [0, 1]) raises :class:`mona.ArgumentError`, a ``ValueError``, whose message names the
  function, the argument and the value found.

Papers by file number (``shared/papers/README.md``): 000 MoChA, 002 hard monotonic
attention, 003 source-aware GMM attention, 004 the conditional Bernoulli.

Inside TorchScript call ``torch.ops.mona.<name>`` directly (same arguments); errors then
arrive as the interpreter's exceptions, with mona's message inside.
"""

import numbers
import operator
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from ._C import ArgumentError

_ops = torch.ops.mona


def _call(op, *args):
    # torch.ops raise mona's argument errors as ValueError (c10::ValueError); re-raise them
    # as mona.ArgumentError (a ValueError too) with the message unchanged.
    try:
        return op(*args)
    except ArgumentError:
        raise
    except ValueError as e:
        raise ArgumentError(str(e)) from None
    except (RuntimeError, NotImplementedError):
        # The dispatcher's own errors, raised before mona's checks run: None for a required
        # tensor ("tensor does not have a device", naming nothing), a value of the wrong
        # type or an int beyond int64 (a paragraph of schema), a tensor on another device
        # (NotImplementedError for its backend). Named here, from the operator's schema, on
        # the error path only.
        problem = _schema_mismatch(op.default._schema, args)
        if problem is not None:
            raise ArgumentError(problem) from None
        raise


def _shown(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _schema_mismatch(schema, args) -> Optional[str]:
    # The first argument the operator's schema cannot take, as mona's message; None if all fit.
    fn = f"mona.{schema.name.split('::')[-1]}"
    for argument, value in zip(schema.arguments, args):
        kind = argument.type.kind()
        optional = kind == "OptionalType"
        if optional:
            if value is None:
                continue
            kind = argument.type.getElementType().kind()
        where = f"{fn}: {argument.name}"
        if kind == "TensorType":
            if value is None:
                return f"{where}: expected a tensor, got None"
            if not isinstance(value, Tensor):
                return (f"{where}: expected a tensor{' or None' if optional else ''}, got {_shown(value)} "
                        "(e.g. torch.tensor(...))")
            if value.device.type != "cpu" or value.layout != torch.strided or value.is_quantized:
                return (f"{where}: expected a dense CPU tensor, got device {value.device}, layout {value.layout}"
                        f"{', quantized' if value.is_quantized else ''}")
        elif kind == "IntType":
            if isinstance(value, bool) or not isinstance(value, int):
                return f"{where}: expected an integer, got {_shown(value)}"
            if not -2**63 <= value < 2**63:
                return f"{where}: expected an integer in [-2**63, 2**63), got {value}"
        elif kind == "FloatType":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"{where}: expected a number, got {_shown(value)}"
        elif kind == "StringType":
            if not isinstance(value, str):
                return f"{where}: expected a string, got {_shown(value)}"
    return None


def _number(fn: str, name: str, value) -> float:
    # A float argument as a float (numpy's scalars too): a str such as "0.5", or None, is
    # refused naming it (float() would parse the one and raise a bare TypeError for the other).
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(f"{fn}: {name}: expected a number, got {_shown(value)}")
    return float(value)


def _bound(n: int) -> str:
    # 2**63 rather than 9223372036854775808 in messages.
    for e in (31, 63, 64):
        if abs(n) == 2**e:
            return f"{'-' if n < 0 else ''}2**{e}"
    return str(n)


def _integer(fn: str, name: str, value, lo: int = -2**63, hi: int = 2**63) -> int:
    # An int argument as an int in [lo, hi) (by default int64, what the operators take): a
    # float such as 2.7 is refused (int() would make it 2), and so is an int that the
    # operator's int64 cannot hold (the dispatcher's message named no argument).
    if isinstance(value, bool):
        raise ArgumentError(f"{fn}: {name}: expected an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise ArgumentError(f"{fn}: {name}: expected an integer, got {value!r}") from None
    if not lo <= value < hi:
        raise ArgumentError(f"{fn}: {name}: expected an integer in [{_bound(lo)}, {_bound(hi)}), got {value}")
    return value


def monotonic_alignment(p_choose: Tensor, in_lens: Optional[Tensor] = None,
                        out_lens: Optional[Tensor] = None,
                        alpha0: Optional[Tensor] = None) -> Tensor:
    """Expected alignment of hard monotonic attention over a whole output sequence.

    002 eqs. 13-14 (0-based): ``q[i, j] = (1 - p[i, j-1]) q[i, j-1] + alpha[i-1, j]``,
    ``alpha[i, j] = p[i, j] q[i, j]``, computed by this recurrence, whose coefficients lie in
    [0, 1] (exact for any T), not by the clamped cumsum/cumprod closed form of 002 eq. 30.
    Rows may sum to less than 1: the missing mass is "attended to nothing" (002 sec. 2.3).

    Args:
        p_choose: ``[B, U, T]`` selection probabilities in [0, 1], float32 or float64.
        in_lens, out_lens: optional ``[B]`` int64 lengths.
        alpha0: optional ``[B, T]`` initial alignment alpha_{-1}, >= 0 (default: all mass on
            entry 0, 002 sec. 2.2).

    Returns:
        alpha ``[B, U, T]``, differentiable in ``p_choose`` and ``alpha0``.

    Raises:
        mona.ArgumentError (ValueError): wrong rank, sizes, dtype or device; lengths outside
            [0, T] / [0, U]; p outside [0, 1] or NaN; alpha0 negative or not finite.
    """
    return _call(_ops.monotonic_alignment, p_choose, in_lens, out_lens, alpha0)


def monotonic_alignment_step(p_choose: Tensor, alpha_prev: Tensor,
                             in_lens: Optional[Tensor] = None) -> Tensor:
    """One output step of :func:`monotonic_alignment` (for RNN decoders; 002 eqs. 13-14).

    Args:
        p_choose: ``[B, T]`` selection probabilities of step i, in [0, 1].
        alpha_prev: ``[B, T]`` the previous step's alignment alpha_{i-1} (for the first
            step, all mass on entry 0), same dtype.
        in_lens: optional ``[B]`` int64.

    Returns:
        alpha_i ``[B, T]``, differentiable in both inputs.

    Raises:
        mona.ArgumentError (ValueError): as :func:`monotonic_alignment`.
    """
    return _call(_ops.monotonic_alignment_step, p_choose, alpha_prev, in_lens)


def mocha_chunkwise(alpha: Tensor, u: Tensor, w: int, in_lens: Optional[Tensor] = None,
                    out_lens: Optional[Tensor] = None) -> Tensor:
    """MoChA's expected chunkwise attention beta (000 eq. 17, the closed form of eq. 25).

    ``beta[i, j] = sum_{k=j}^{j+w-1} alpha[i, k] exp(u[i, j]) / sum_{l=k-w+1}^{k} exp(u[i, l])``,
    evaluated with max-shifted log-normalisers (never ``exp(u)`` alone). w = 1 gives
    ``beta = alpha``.

    Args:
        alpha: ``[B, U, T]`` expected alignment (e.g. from :func:`monotonic_alignment`).
        u: ``[B, U, T]`` chunk energies, same dtype.
        w: chunk size, >= 1.
        in_lens, out_lens: optional ``[B]`` int64.

    Returns:
        beta ``[B, U, T]``, differentiable in ``alpha`` and ``u``.

    Raises:
        mona.ArgumentError (ValueError): shapes or dtypes differ; w < 1; bad lengths;
            non-finite values.
    """
    return _call(_ops.mocha_chunkwise, alpha, u, _integer("mona.mocha_chunkwise", "w", w), in_lens, out_lens)


def matcha_chunkwise(alpha_prev: Tensor, p_choose: Tensor, u: Tensor,
                     in_lens: Optional[Tensor] = None,
                     out_lens: Optional[Tensor] = None) -> Tensor:
    """MAtChA's expected attention (000 App. C, eq. 28): adaptive chunks from t_{i-1} to t_i.

    O(T^2) time and O(T) extra memory per row (the paper's form needs O(U T^2) memory).

    Args:
        alpha_prev: ``[B, U, T]``, row i holds alpha_{i-1} (row 0: the initial alignment).
        p_choose: ``[B, U, T]`` selection probabilities in [0, 1].
        u: ``[B, U, T]`` chunk energies. All three in one dtype.
        in_lens, out_lens: optional ``[B]`` int64.

    Returns:
        beta ``[B, U, T]``, differentiable in all three inputs.

    Raises:
        mona.ArgumentError (ValueError): shapes or dtypes differ; bad lengths or values.
    """
    return _call(_ops.matcha_chunkwise, alpha_prev, p_choose, u, in_lens, out_lens)


def masked_softmax(e: Tensor, in_lens: Optional[Tensor] = None,
                   out_lens: Optional[Tensor] = None) -> Tensor:
    """Softmax of energies over the valid entries of each row (soft attention, 000 eqs. 4-6).

    Args:
        e: ``[B, U, T]`` energies, float32 or float64. in_lens, out_lens: optional ``[B]``.

    Returns:
        weights ``[B, U, T]``; padded rows and entries are 0. Differentiable in ``e``.

    Raises:
        mona.ArgumentError (ValueError): wrong rank, dtype or device; bad lengths; a
            non-finite energy in the valid region (mask with the lengths, not with -inf).
    """
    return _call(_ops.masked_softmax, e, in_lens, out_lens)


def additive_energy(query: Tensor, keys: Tensor, w: Tensor) -> Tensor:
    """Additive (Bahdanau) energies of a batch of queries against a memory, in one fused pass.

    002 eqs. 15-16, 000 eq. 5: ``e[b, i, j] = sum_k w[k] tanh(query[b, i, k] + keys[b, j, k])``
    with ``query = W_s s + b`` and ``keys = W_h h`` (the caller's projections) and ``w = v``
    (eq. 15) or ``g v / ||v||`` (eq. 16; add the offset ``r`` after). The same values as
    ``torch.tanh(query.unsqueeze(2) + keys.unsqueeze(1)) @ w``, but the ``[B, U, T, d]``
    tensor of tanh values is never stored, neither for the output nor for the backward pass
    (which recomputes it a row of ``d`` at a time): the graph keeps only the inputs.
    tanh is mona's vectorised one (``include/mona/core/additive_energy.h``): absolute error a
    few units in the last place of 1 for every input, so an energy is within a few ulp of
    ``sum_k |w[k]|`` of the exact one.

    Args:
        query: ``[B, U, d]``, float32 or float64; or ``[B, d]``, one decoder step (U = 1).
        keys: ``[B, T, d]``, the same dtype.
        w: ``[d]``, the same dtype.

    Returns:
        energies ``[B, U, T]`` (``[B, 1, T]`` for a one-step query; every entry scored: mask
        padding after). Differentiable in
        all three arguments; only the gradients the graph needs are computed.

    Raises:
        mona.ArgumentError (ValueError): wrong rank, sizes, dtype or device.
    """
    return _call(_ops.additive_energy, query, keys, w)


def attention_context(weights: Tensor, values: Tensor) -> Tensor:
    """Context vector of one output step: ``c[b] = sum_j weights[b, j] values[b, j, :]``.

    002 eq. 3, 000 eq. 26, for a decoder that attends one output step at a time (a query
    that depends on the previous context): the value of
    ``torch.bmm(weights.unsqueeze(1), values).squeeze(1)`` in one pass over the memory each
    way, instead of ATen's matrix product per batch element. Entries of weight exactly 0
    are skipped, so padding values never reach the context. For whole output sequences
    (weights ``[B, U, T]``) use ``torch.bmm``, whose BLAS product is faster there.

    Args:
        weights: ``[B, T]`` attention weights of the step (alpha, beta, softmax or GMM
            weights), float32 or float64.
        values: ``[B, T, d]`` the memory, the same dtype.

    Returns:
        context ``[B, d]``. Differentiable in both arguments; only the gradients the graph
        needs are computed.

    Raises:
        mona.ArgumentError (ValueError): wrong rank, sizes, dtype or device.
    """
    return _call(_ops.attention_context, weights, values)


class MonotonicStep(NamedTuple):
    """What :func:`monotonic_attention_step` returns."""
    alpha: Tensor    #: alpha_i ``[B, T]``, the next step's ``alpha_prev``
    weights: Tensor  #: beta_i ``[B, T]`` (a copy of alpha_i under ``rule="none"``)
    context: Tensor  #: c_i ``[B, D]``


def monotonic_attention_step(energy: Tensor, alpha_prev: Tensor, values: Tensor,
                             chunk_energy: Optional[Tensor] = None, rule: str = "none", w: int = 1,
                             noise: Optional[Tensor] = None, noise_std: float = 0.0,
                             in_lens: Optional[Tensor] = None) -> MonotonicStep:
    """One training step of an RNN decoder's monotonic attention, from energies to context.

    000 eqs. 20-26 (MoChA), with eq. 28 for MAtChA and 002 eqs. 12-13 and 3 for hard
    monotonic attention, as one autograd node::

        p_i     = sigmoid(e_i + noise_std * noise)
        alpha_i = monotonic_alignment_step(p_i, alpha_prev)
        beta_i  = alpha_i                                 rule "none"
                  mocha_chunkwise(alpha_i, u_i, w)        rule "fixed" (MoChA)
                  matcha_chunkwise(alpha_prev, p_i, u_i)  rule "adaptive" (MAtChA)
        c_i     = attention_context(beta_i, values)

    The same kernels, forward and backward, as those functions composed; one operator where
    the composition is five to ten, which is most of a decoder step's cost at small batches.

    Args:
        energy: e_i ``[B, T]`` or ``[B, 1, T]`` (one step of an energy), float32 or float64.
        alpha_prev: alpha_{i-1} ``[B, T]``, the same dtype.
        values: the memory ``[B, T, D]``, the same dtype.
        chunk_energy: u_i like ``energy``; required by "fixed" and "adaptive", ``None`` under
            "none".
        rule: "none", "fixed" or "adaptive".
        w: the chunk size of "fixed" (>= 1; read only under "fixed").
        noise: pre-sigmoid noise like ``energy`` (e.g. ``torch.randn_like(energy)`` in
            training, 002 sec. 2.5), or ``None``; not differentiated.
        noise_std: its scale.
        in_lens: ``[B]`` or ``None``.

    Returns:
        :class:`MonotonicStep` (alpha, weights, context). Differentiable in energy,
        alpha_prev, chunk_energy and values; the gradients of energy and chunk_energy have
        their shapes.

    Raises:
        mona.ArgumentError (ValueError): shapes, dtypes, a chunk energy given or missing
        against ``rule``, w < 1 under "fixed", an unknown rule; p outside [0, 1] (a NaN
        energy).
    """
    w = _integer("mona.monotonic_attention_step", "w", w)
    return MonotonicStep(*_call(_ops.monotonic_attention_step, energy, noise, noise_std, alpha_prev,
                                chunk_energy, values, rule, w, in_lens))


def gmm_attention_weights(mu: Tensor, variance: Tensor, weights: Optional[Tensor] = None,
                          nu: Optional[Tensor] = None, delta: Optional[Tensor] = None,
                          window: str = "none", radius: float = 2.0, width: int = 4,
                          in_lens: Optional[Tensor] = None,
                          out_lens: Optional[Tensor] = None) -> Tensor:
    """GMM, SAGMM and SAGMM-tr attention weights (003 eqs. 7, 11-12, 14-19).

    ``alpha[b, i, j] = delta_j sum_h w[b, i, h] M N(nu_j; mu[b, i, h], variance[b, i, h])``
    with N the Gaussian density of a VARIANCE (003 eq. 11) and M the window mask:
    ``"none"`` (GMM / SAGMM), ``"adaptive"`` (SAGMM-tr: ``|nu_j - mu| < radius sqrt(v)``,
    eqs. 14-15) or ``"fixed"`` (``|j - gamma| < width / 2`` around the nearest entry,
    eqs. 17-19). See ``include/mona/core/gmm.h``.

    Args:
        mu, variance: ``[B, U, H]`` positions and variances (> 0) of H Gaussians per step.
        weights: optional ``[B, U, H]`` mixture weights >= 0 (default 1).
        nu, delta: optional ``[B, T]`` positions and scales of the memory entries (default
            ``nu_j = j + 1``, ``delta_j = 1``: plain GMM). SAGMM passes
            ``delta = sigmoid(.)`` and ``nu = cumsum(delta)``. T comes from nu, delta or
            ``in_lens.max()``, so one of the three is required.
        window, radius, width: the window (see above).
        in_lens, out_lens: optional ``[B]`` int64.

    Returns:
        alpha ``[B, U, T]``, differentiable in mu, variance, weights, nu and delta (the
        window held fixed).

    Raises:
        mona.ArgumentError (ValueError): shapes, dtypes, unknown window, radius <= 0,
            width < 1 or not an integer, non-positive variance, negative weights or delta,
            bad lengths.
    """
    return _call(_ops.gmm_attention_weights, mu, variance, weights, nu, delta, window,
                 _number("mona.gmm_attention_weights", "radius", radius),
                 _integer("mona.gmm_attention_weights", "width", width), in_lens, out_lens)


def gmm_length_penalty(mu: Tensor, nu: Optional[Tensor], lambda_: float,
                       in_lens: Optional[Tensor] = None,
                       out_lens: Optional[Tensor] = None) -> Tensor:
    """Length penalty of 003 eq. 13 per sequence: ``lambda (sum_h (mu_last - m)^2 + (nu_last - m)^2)``.

    Args:
        mu: ``[B, U, H]``; nu: ``[B, T]`` or None (``nu_j = j + 1``, then ``in_lens`` fixes
            T); lambda_: >= 0 (003 uses 5e-4); in_lens, out_lens: optional ``[B]`` int64.

    Returns:
        ``[B]``, differentiable in mu and nu.

    Raises:
        mona.ArgumentError (ValueError): shapes, dtypes, lambda_ negative, bad lengths.
    """
    return _call(_ops.gmm_length_penalty, mu, nu, _number("mona.gmm_length_penalty", "lambda_", lambda_),
                 in_lens, out_lens)


def poisson_binomial_log_prob(logits: Tensor, k: Tensor,
                              in_lens: Optional[Tensor] = None) -> Tensor:
    """log P(K = k) of the Poisson-binomial: K = sum_t B_t, B_t ~ Bernoulli(sigmoid(x_t)) (004 eq. 4).

    Computed by the normalised recursion of 004 eq. 7 in log space, O(T k) per row; the
    gradient is ``d/dx_t = P(b_t = 1 | k) - p_t``.

    Args:
        logits: ``[B, T]`` x_t = log odds, float32 or float64.
        k: ``[B]`` int64, ``0 <= k[b] <= T_b``.
        in_lens: optional ``[B]`` int64 trial counts T_b.

    Returns:
        ``[B]``, differentiable in logits.

    Raises:
        mona.ArgumentError (ValueError): shapes, dtypes, k outside [0, T_b], non-finite logits.
    """
    return _call(_ops.poisson_binomial_log_prob, logits, k, in_lens)


def cb_log_prob(logits: Tensor, b: Tensor, in_lens: Optional[Tensor] = None) -> Tensor:
    """log P(b | k) of the conditional Bernoulli with k = sum_t b_t (004 eq. 3).

    Args:
        logits: ``[B, T]``; b: ``[B, T]`` 0/1 values in the dtype of logits; in_lens:
            optional ``[B]`` int64.

    Returns:
        ``[B]``, differentiable in logits (``b_t - P(b_t = 1 | k)``).

    Raises:
        mona.ArgumentError (ValueError): shapes, dtypes, b not in {0, 1}.
    """
    return _call(_ops.cb_log_prob, logits, b, in_lens)


def cb_log_table(logits: Tensor, k: Tensor, in_lens: Optional[Tensor] = None) -> Tensor:
    """The CB suffix table ``Q[b, t, j] = log P(sum_{s >= t} B_s = j)`` (004 eq. 7 normalised).

    Returns ``[B, T + 1, K + 1]`` (K = max k); infeasible entries are -inf. Entries outside
    row b's table (t > T_b, or j > k[b]) hold 0, which is no log-probability there: read
    only ``[b, :T_b + 1, :k[b] + 1]``. Differentiable in logits. Raises mona.ArgumentError as
    :func:`poisson_binomial_log_prob`.
    """
    return _call(_ops.cb_log_table, logits, k, in_lens)


def cb_marginals(logits: Tensor, k: Tensor, in_lens: Optional[Tensor] = None) -> Tensor:
    """Exact marginals ``P(b_t = 1 | k)`` ``[B, T]`` of the CB (not differentiable).

    Raises mona.ArgumentError as :func:`poisson_binomial_log_prob`.
    """
    return _call(_ops.cb_marginals, logits, k, in_lens)


def cb_idb_step_log_probs(logits: Tensor, b: Tensor, in_lens: Optional[Tensor] = None) -> Tensor:
    """IDB step log-probabilities ``log P(b_t | highs still to place)`` ``[B, T]`` of a given
    sample b (004 eqs. 10-11); they sum to ``log P(b | k)``. Differentiable in logits.
    Raises mona.ArgumentError as :func:`cb_log_prob` (b of 0/1 values, the shape of logits)."""
    return _call(_ops.cb_idb_step_log_probs, logits, b, in_lens)


def cb_bb_step_log_probs(logits: Tensor, b: Tensor, in_lens: Optional[Tensor] = None) -> Tensor:
    """BB step log-probabilities ``log P(t_r | t_{r-1})`` ``[B, K]`` of the highs of b in
    increasing order (004 eqs. 12-13); they sum to ``log P(b | k)``. Differentiable in logits.
    Raises mona.ArgumentError as :func:`cb_log_prob` (b of 0/1 values, the shape of logits)."""
    return _call(_ops.cb_bb_step_log_probs, logits, b, in_lens)


def cb_db_step_log_probs(logits: Tensor, order: Tensor, k: Tensor,
                         in_lens: Optional[Tensor] = None) -> Tensor:
    """DB step log-probabilities ``log P(t_j | A_{j-1})`` ``[B, K]`` of the draft order
    ``order`` ``[B, K]`` int64 (004 eq. 8); they sum to ``log P(set | k) - log k!``.
    Differentiable in logits. Raises mona.ArgumentError as :func:`poisson_binomial_log_prob`,
    and for an ``order`` that is not int64 or whose first k[b] entries of row b are not
    distinct positions below T_b."""
    return _call(_ops.cb_db_step_log_probs, logits, order, k, in_lens)


class CbSample(NamedTuple):
    """An exact CB draw: ``b`` ``[B, T]`` (0/1 in the dtype of logits), ``positions``
    ``[B, K]`` int64 (BB: the highs in increasing order; DB: the draft order; IDB: empty
    ``[B, 0]``; entries r >= k[b] are 0), ``step_log_probs`` (IDB ``[B, T]``, BB/DB
    ``[B, K]``, differentiable in logits)."""
    b: Tensor
    positions: Tensor
    step_log_probs: Tensor


def cb_sample(logits: Tensor, k: Tensor, sampler: str = "bb", seed: int = 0,
              in_lens: Optional[Tensor] = None) -> CbSample:
    """Exact sample of the conditional Bernoulli given k highs, with its step log-probabilities.

    Samplers (004): ``"idb"`` (eq. 10, trials in order t = 0 .. T_b - 1; reverse the
    logits for eq. 25's backward order), ``"bb"`` (eq. 12) and ``"db"`` (eq. 8). The draws
    come from mona's own generator seeded with ``seed``: the same seed gives the same draws
    whatever the thread count (``torch.manual_seed`` does not affect them).

    Args:
        logits: ``[B, T]``; k: ``[B]`` int64 (``0 <= k[b] <= T_b``); sampler: "idb", "bb"
            or "db"; seed: int, any 64-bit seed: in ``[-2**63, 2**64)``, read modulo 2**64
            (-1 and 2**64 - 1 are the same seed); in_lens: optional ``[B]`` int64.

    Returns:
        :class:`CbSample`.

    Raises:
        mona.ArgumentError (ValueError): unknown sampler; a seed outside 64 bits; as
            :func:`poisson_binomial_log_prob`.
    """
    ops = {"idb": _ops.cb_sample_idb, "bb": _ops.cb_sample_bb, "db": _ops.cb_sample_db}
    if not isinstance(sampler, str) or sampler not in ops:
        raise ArgumentError(f"mona.cb_sample: sampler: expected 'idb', 'bb' or 'db', got {sampler!r}")
    seed = _integer("mona.cb_sample", "seed", seed, hi=2**64)
    if seed >= 2**63:  # the operator's int is int64: the same 64 bits, read as signed
        seed -= 2**64
    return CbSample(*_call(ops[sampler], logits, k, seed, in_lens))


def cb_marginal_log_likelihood(logits: Tensor, log_emit: Tensor,
                               in_lens: Optional[Tensor] = None,
                               out_lens: Optional[Tensor] = None) -> Tensor:
    """Exact ``log P(c) = log sum_b P(b) P(c | b)`` of the CB emission model (004 eq. 34), O(L T).

    Trial t emits with p_t = sigmoid(logits[b, t]); the l-th emission, at frame t_l, scores
    ``log_emit[b, l, t_l] = log P(c_l | t_l, c_<l)``.

    Args:
        logits: ``[B, T]``; log_emit: ``[B, U, T]`` same dtype; in_lens: optional ``[B]``
            frames T_b; out_lens: optional ``[B]`` labels ``L_b <= T_b`` (default U).

    Returns:
        ``[B]``, differentiable in logits (``E[b_t | c] - p_t``) and log_emit (alignment
        posteriors).

    Raises:
        mona.ArgumentError (ValueError): shapes, dtypes, more labels than frames, bad values.
    """
    return _call(_ops.cb_marginal_log_likelihood, logits, log_emit, in_lens, out_lens)


__all__ = [
    "additive_energy", "attention_context", "CbSample", "cb_bb_step_log_probs", "cb_db_step_log_probs", "cb_idb_step_log_probs",
    "cb_log_prob", "cb_log_table", "cb_marginal_log_likelihood", "cb_marginals", "cb_sample",
    "gmm_attention_weights", "gmm_length_penalty", "masked_softmax", "matcha_chunkwise",
    "mocha_chunkwise", "monotonic_alignment", "monotonic_alignment_step", "monotonic_attention_step",
    "MonotonicStep", "poisson_binomial_log_prob",
]
