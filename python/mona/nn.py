"""``torch.nn.Module``s for mona's attention mechanisms, for use inside a user's own model.

These are Python modules around the operators of :mod:`mona.functional` (the C++ modules of
``include/mona/nn/attention.h`` are not bound: their interface is built for mona's own
decoder and streaming runtime). Their parameters, initialisation and options follow the C++
``AttentionOptions`` (002 App. G): ``init_r = -4``, ``g = 1 / sqrt(d)``, pre-sigmoid noise of
standard deviation ``noise_std`` in training mode only (002 sec. 2.5).

Each module scores all output steps at once: ``forward(queries [B, U, Dq], memory [B, T, Dh],
memory_lengths=None, out_lengths=None)`` returns ``(contexts [B, U, Dh], weights [B, U, T])``
and keeps the expected alignment of its last call in ``last_alignment``.

An RNN decoder whose query depends on the previous step's context decodes one output step at a
time, as the C++ ``Attention::step`` does (002 eqs. 13-14 row by row)::

    memory = attention.prepare(h, h_lengths)     # the keys W_h h, computed once
    state = attention.initial_state(memory)      # alpha_{-1} (GMM: the means mu_0 = 0)
    for i in range(U):
        context, weights, state = attention.step(query_i, memory, state)

With the same queries this gives ``forward``'s rows, and the same gradients.
"""

import math
from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor, nn

from . import functional as F
from ._C import ArgumentError, attention_defaults, check_attention_options

# The option defaults of the C++ AttentionOptions and GmmAttentionOptions
# (include/mona/nn/attention.h), read from the compiled module: one copy of the values.
_D = attention_defaults

__all__ = ["MonotonicEnergy", "AdditiveEnergy", "MonotonicAttention", "MochaAttention",
           "MatchaAttention", "SoftAttention", "GmmAttention", "PreparedMemory", "GmmMemory"]


class AdditiveEnergy(nn.Module):
    """``e_j = v^T tanh(W_s s + W_h h_j + b)`` (002 eq. 15, 000 eq. 5): queries [B, U, Dq],
    memory [B, T, Dh] -> energies [B, U, T], by :func:`mona.functional.additive_energy`
    (the [B, U, T, d] tanh values are neither stored nor kept for the backward pass)."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0):
        super().__init__()
        d = attention_dim or memory_dim
        self.query_proj = nn.Linear(query_dim, d, bias=True)
        self.memory_proj = nn.Linear(memory_dim, d, bias=False)
        self.v = nn.Parameter(torch.empty(d).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))

    def keys(self, memory: Tensor) -> Tensor:
        """The memory's part ``W_h h`` [B, T, d], once per memory (see :meth:`score`)."""
        return self.memory_proj(memory)

    def score(self, queries: Tensor, keys: Tensor) -> Tensor:
        """Energies [B, U, T] of queries [B, U, Dq] against ``keys(memory)``."""
        return F.additive_energy(self.query_proj(queries), keys, self.v)

    def forward(self, queries: Tensor, memory: Tensor) -> Tensor:
        return self.score(queries, self.keys(memory))


class MonotonicEnergy(AdditiveEnergy):
    """``e_j = g v^T / ||v|| tanh(W_s s + W_h h_j + b) + r`` (002 eq. 16), g = 1/sqrt(d) and
    r = init_r initially (002 App. G)."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0,
                 init_r: float = _D["init_r"]):
        super().__init__(query_dim, memory_dim, attention_dim)
        d = self.v.numel()
        self.g = nn.Parameter(torch.tensor(1 / math.sqrt(d)))
        self.r = nn.Parameter(torch.tensor(float(init_r)))

    def score(self, queries: Tensor, keys: Tensor) -> Tensor:
        w = self.g * self.v / self.v.norm()
        return F.additive_energy(self.query_proj(queries), keys, w) + self.r


_INTEGER_OPTIONS = ("query_dim", "memory_dim", "attention_dim", "chunk_size", "num_heads",
                    "window_width")


def _checked(who: str, **options):
    """The options of module ``who`` as the C++ ``AttentionOptions`` checks them (one set of
    rules, include/mona/nn/attention.h): integers as ints (2.5 and True refused), the rest as
    floats. Returns them in the order given; raises :class:`mona.ArgumentError` naming ``who``,
    the option and its value."""
    checked = {}
    for name, value in options.items():
        if name in _INTEGER_OPTIONS:
            checked[name] = F._integer(who, name, value)
        else:
            checked[name] = F._number(who, name, value)
    check_attention_options(who, checked)
    return tuple(checked.values())


class _KeepsLast(nn.Module):
    """A module that keeps tensors of its last call in ``last_*`` attributes, autograd graph
    included (a loss may use them, as the GMM length penalty uses ``last_mu``). They belong to
    that call, not to the module: a copy (``copy.deepcopy``, ``AveragedModel``) or a pickle
    (``torch.save(module)``) leaves them ``None``."""

    def __getstate__(self):
        state = dict(super().__getstate__())
        for name in ("last_alignment", "last_mu"):
            if name in state:
                state[name] = None
        return state


def _context(weights: Tensor, memory: Tensor, lengths: Optional[Tensor]) -> Tensor:
    """``weights`` [B, U, T] x ``memory`` [B, T, Dh], with the padding entries (``j >=
    lengths[b]``) read as zeros: their weights are exactly 0, but 0 * NaN is NaN, and ``step``
    (``F.attention_context``) skips them, so ``forward``'s rows stay ``step``'s whatever the
    padding holds."""
    if lengths is not None:
        padding = torch.arange(memory.size(1), device=memory.device) >= lengths.unsqueeze(1)
        memory = memory.masked_fill(padding.unsqueeze(2), 0)
    return torch.bmm(weights, memory)


class PreparedMemory(NamedTuple):
    """A memory prepared once for step-by-step decoding (``prepare``; the C++
    ``Attention::prepare``): ``values`` [B, T, Dh], the energy's ``keys`` ``W_h h`` [B, T, d],
    the chunk energy's ``chunk_keys`` (MoChA, MAtChA; else None) and ``lengths`` [B] (or
    None: all T entries valid)."""
    values: Tensor
    keys: Tensor
    chunk_keys: Optional[Tensor]
    lengths: Optional[Tensor]


class GmmMemory(NamedTuple):
    """A memory prepared once for :meth:`GmmAttention.step`: ``values`` [B, T, Dh], the
    positions ``nu`` and densities ``delta`` [B, H, T] (003 eqs. 9-10; nu_j = j + 1 and
    delta = 1 without ``source_aware``) and ``lengths`` [B] (or None)."""
    values: Tensor
    nu: Tensor
    delta: Tensor
    lengths: Optional[Tensor]


class _Stepwise(_KeepsLast):
    """``prepare`` and ``initial_state`` of the modules with an additive energy ``energy`` (and
    ``chunk_energy`` for MoChA and MAtChA)."""

    def prepare(self, memory: Tensor, memory_lengths: Optional[Tensor] = None) -> PreparedMemory:
        """Memory [B, T, Dh] and optional lengths [B] -> :class:`PreparedMemory` for ``step``."""
        chunk = getattr(self, "chunk_energy", None)
        return PreparedMemory(memory, self.energy.keys(memory),
                              chunk.keys(memory) if chunk is not None else None, memory_lengths)

    def initial_state(self, memory: PreparedMemory) -> Tensor:
        """alpha_{-1} [B, T]: all mass on entry 0 (002 sec. 2.2)."""
        alpha0 = memory.values.new_zeros(memory.values.shape[:2])
        alpha0[:, :1] = 1  # (no entry when T = 0)
        return alpha0


class _Monotonic(_Stepwise):
    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0,
                 init_r: float = _D["init_r"], noise_std: float = _D["noise_std"]):
        super().__init__()
        query_dim, memory_dim, attention_dim, init_r, noise_std = _checked(
            type(self).__name__, query_dim=query_dim, memory_dim=memory_dim, attention_dim=attention_dim,
            init_r=init_r, noise_std=noise_std)
        self.energy = MonotonicEnergy(query_dim, memory_dim, attention_dim, init_r)
        self.noise_std = noise_std
        self.last_alignment: Optional[Tensor] = None

    def p_choose(self, queries: Tensor, memory: Tensor) -> Tensor:
        """Selection probabilities sigmoid(e + noise) [B, U, T] (noise in training only)."""
        return self._p_choose(queries, self.energy.keys(memory))

    def _p_choose(self, queries: Tensor, keys: Tensor) -> Tensor:
        e = self.energy.score(queries, keys)
        if self.training and self.noise_std > 0:
            e = e + self.noise_std * torch.randn_like(e)
        return torch.sigmoid(e)

    # monotonic_attention_step's chunk rule and chunk size (MoChA and MAtChA override).
    _rule = "none"

    def _chunk_size(self) -> int:
        return 1

    def step(self, query: Tensor, memory: PreparedMemory,
             alpha_prev: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One output step: query s_{i-1} [B, Dq], the prepared memory and alpha_{i-1} [B, T]
        (``initial_state`` at the first step) -> ``(context [B, Dh], weights [B, T],
        alpha_i [B, T])``, from the step's energies by
        :func:`mona.functional.monotonic_attention_step` (one operator: the alignment step,
        the chunk weights and the context). Padding entries get weight 0. Raises
        :class:`mona.ArgumentError` (a ``ValueError``) as that function does (shapes,
        dtypes, lengths, alpha_prev < 0)."""
        e = self.energy.score(query.unsqueeze(1), memory.keys)  # [B, 1, T]
        noise = torch.randn_like(e) if self.training and self.noise_std > 0 else None
        chunk = getattr(self, "chunk_energy", None)
        u = chunk.score(query.unsqueeze(1), memory.chunk_keys) if chunk is not None else None
        s = F.monotonic_attention_step(e, alpha_prev, memory.values, u, self._rule, self._chunk_size(),
                                       noise, self.noise_std, memory.lengths)
        return s.context, s.weights, s.alpha


class MonotonicAttention(_Monotonic):
    """Hard monotonic attention trained in expectation (002 eqs. 13-16): the weights are the
    expected alignment alpha of :func:`mona.functional.monotonic_alignment`."""

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        alpha = F.monotonic_alignment(self.p_choose(queries, memory), memory_lengths, out_lengths)
        self.last_alignment = alpha
        return _context(alpha, memory, memory_lengths), alpha


class MochaAttention(_Monotonic):
    """MoChA (000 eqs. 14-25): the expected alignment spread over chunks of ``chunk_size``
    entries by :func:`mona.functional.mocha_chunkwise` with an additive chunk energy."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0,
                 chunk_size: int = _D["chunk_size"], init_r: float = _D["init_r"],
                 noise_std: float = _D["noise_std"]):
        super().__init__(query_dim, memory_dim, attention_dim, init_r, noise_std)
        (*_, chunk_size) = _checked("MochaAttention", query_dim=query_dim, memory_dim=memory_dim,
                                    chunk_size=chunk_size)
        self.chunk_energy = AdditiveEnergy(query_dim, memory_dim, attention_dim)
        self.chunk_size = chunk_size

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        alpha = F.monotonic_alignment(self.p_choose(queries, memory), memory_lengths, out_lengths)
        beta = F.mocha_chunkwise(alpha, self.chunk_energy(queries, memory), self.chunk_size,
                                 memory_lengths, out_lengths)
        self.last_alignment = alpha
        return _context(beta, memory, memory_lengths), beta

    _rule = "fixed"

    def _chunk_size(self) -> int:
        return self.chunk_size


class MatchaAttention(_Monotonic):
    """MAtChA (000 App. C): chunks that span from the previous step's chosen entry to the
    current one, by :func:`mona.functional.matcha_chunkwise`."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0,
                 init_r: float = _D["init_r"], noise_std: float = _D["noise_std"]):
        super().__init__(query_dim, memory_dim, attention_dim, init_r, noise_std)
        self.chunk_energy = AdditiveEnergy(query_dim, memory_dim, attention_dim)

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        p = self.p_choose(queries, memory)
        alpha = F.monotonic_alignment(p, memory_lengths, out_lengths)
        alpha0 = torch.zeros_like(alpha[:, :1])
        alpha0[:, :, :1] = 1  # the initial alignment: all mass on entry 0 (002 sec. 2.2)
        alpha_prev = torch.cat([alpha0, alpha[:, :-1]], dim=1)
        beta = F.matcha_chunkwise(alpha_prev, p, self.chunk_energy(queries, memory),
                                  memory_lengths, out_lengths)
        self.last_alignment = alpha
        return _context(beta, memory, memory_lengths), beta

    _rule = "adaptive"


class SoftAttention(_Stepwise):
    """Soft attention (000 eqs. 4-6) with an additive energy and a masked softmax (the
    offline baseline)."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0):
        super().__init__()
        query_dim, memory_dim, attention_dim = _checked(
            "SoftAttention", query_dim=query_dim, memory_dim=memory_dim, attention_dim=attention_dim)
        self.energy = AdditiveEnergy(query_dim, memory_dim, attention_dim)
        self.last_alignment: Optional[Tensor] = None

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        w = F.masked_softmax(self.energy(queries, memory), memory_lengths, out_lengths)
        self.last_alignment = w
        return _context(w, memory, memory_lengths), w

    def initial_state(self, memory: PreparedMemory) -> Optional[Tensor]:
        """None: soft attention keeps no alignment from step to step."""
        return None

    def step(self, query: Tensor, memory: PreparedMemory,
             state: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        """One output step: query [B, Dq] -> ``(context [B, Dh], weights [B, T], state)``; soft
        attention keeps no alignment state (``state`` is passed through, so the loop of the
        module docstring works unchanged). Raises :class:`mona.ArgumentError` (a
        ``ValueError``) as the functional calls do."""
        e = self.energy.score(query.unsqueeze(1), memory.keys)
        w = F.masked_softmax(e, memory.lengths)[:, 0]
        return F.attention_context(w, memory.values), w, state


class GmmAttention(_KeepsLast):
    """GMM attention (003 eqs. 4-8), SAGMM (``source_aware``, eqs. 9-12) and SAGMM-tr
    (``window="adaptive"``, eqs. 14-16, or ``"fixed"``, eqs. 17-20), with the parameters and
    options of the C++ ``GmmAttention`` (``include/mona/nn/gmm_attention.h``,
    ``GmmAttentionOptions``).

    From each query a linear layer gives, per head h of ``num_heads``: the step
    ``Delta = softplus(.)`` (clamped to ``max_step`` when > 0; bias ``init_step_bias``), the
    variance ``softplus(.) + min_variance`` (bias 0.5: about 1; clamped to ``max_variance``
    when > 0) and the mixture weight
    (softmax over heads). ``mu_i = mu_{i-1} + Delta_i`` with ``mu_0 = 0`` (eq. 5). Memory
    positions: ``nu_j = j + 1`` (GMM), or with ``source_aware`` ``delta_j = sigmoid(W h_j + b)``
    per head (bias 2) and ``nu = cumsum(delta)`` (eqs. 9-10). The weights are
    :func:`mona.functional.gmm_attention_weights` summed over heads.

    ``forward(queries [B, U, Dq], memory [B, T, Dh], memory_lengths=None, out_lengths=None)``
    returns ``(contexts [B, U, Dh], weights [B, U, T])``; ``last_alignment`` holds the weights
    and ``last_mu`` the means ``[B, U, H]`` (for the length penalty of eq. 13,
    :func:`mona.functional.gmm_length_penalty`). Errors as the functional call
    (``mona.ArgumentError``, a ``ValueError``). Step by step: ``prepare`` (the memory
    positions nu and densities delta, once), ``initial_state`` (mu_0 = 0, [B, H]) and ``step``,
    whose state is the means mu_i [B, H]."""

    def __init__(self, query_dim: int, memory_dim: int, num_heads: int = _D["num_heads"],
                 source_aware: bool = False, window: str = "none",
                 window_radius: float = _D["window_radius"], window_width: int = _D["window_width"],
                 max_step: float = _D["max_step"], min_variance: float = _D["min_variance"],
                 init_step_bias: float = _D["init_step_bias"],
                 max_variance: float = _D["max_variance"]):
        super().__init__()
        if window not in ("none", "adaptive", "fixed"):
            raise ArgumentError(f"GmmAttention: window must be none, adaptive or fixed, got {window!r}")
        (query_dim, memory_dim, num_heads, window_radius, window_width, max_step, min_variance,
         init_step_bias, max_variance) = _checked(
            "GmmAttention", query_dim=query_dim, memory_dim=memory_dim, num_heads=num_heads,
            window_radius=window_radius, window_width=window_width, max_step=max_step,
            min_variance=min_variance, init_step_bias=init_step_bias, max_variance=max_variance)
        self.num_heads, self.source_aware, self.window = num_heads, source_aware, window
        self.window_radius, self.window_width = window_radius, window_width
        self.max_step, self.min_variance, self.max_variance = max_step, min_variance, max_variance
        self.query_proj = nn.Linear(query_dim, 3 * num_heads)
        with torch.no_grad():
            self.query_proj.bias[:num_heads].fill_(init_step_bias)
            self.query_proj.bias[num_heads:2 * num_heads].fill_(0.5)
        self.position = nn.Linear(memory_dim, num_heads) if source_aware else None
        if self.position is not None:
            with torch.no_grad():
                self.position.bias.fill_(2.0)
        self.last_alignment: Optional[Tensor] = None
        self.last_mu: Optional[Tensor] = None

    def _parameters_of(self, queries: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Per head: the step Delta, the variance and the mixture weight [..., H] (eqs. 4-8)."""
        H = self.num_heads
        raw = self.query_proj(queries)
        step = torch.nn.functional.softplus(raw[..., :H])
        if self.max_step > 0:
            step = step.clamp(0.0, self.max_step)
        variance = torch.nn.functional.softplus(raw[..., H:2 * H]) + self.min_variance
        if self.max_variance > 0:
            variance = variance.clamp(max=self.max_variance)
        return step, variance, torch.softmax(raw[..., 2 * H:], dim=-1)

    def prepare(self, memory: Tensor, memory_lengths: Optional[Tensor] = None) -> GmmMemory:
        """Memory [B, T, Dh] and optional lengths [B] -> :class:`GmmMemory` for ``step``."""
        H, (B, T) = self.num_heads, memory.shape[:2]
        if self.position is not None:
            delta = torch.sigmoid(self.position(memory)).permute(0, 2, 1)  # [B, H, T]
            nu = torch.cumsum(delta, dim=-1)
        else:
            nu = torch.arange(1, T + 1, dtype=memory.dtype).view(1, 1, T).expand(B, H, T)
            delta = torch.ones(B, H, T, dtype=memory.dtype)
        return GmmMemory(memory, nu, delta, memory_lengths)

    def initial_state(self, memory: GmmMemory) -> Tensor:
        """mu_0 = 0 for every head, [B, H] (eq. 5)."""
        return memory.values.new_zeros(memory.values.shape[0], self.num_heads)

    def _weights(self, mu: Tensor, variance: Tensor, weights: Tensor, memory: GmmMemory,
                 out_lengths: Optional[Tensor]) -> Tensor:
        """Mixture weights [B, U, T] summed over heads from per-head mu, variance, weight [B, U, H],
        one :func:`mona.functional.gmm_attention_weights` call per head (its positions nu and
        densities delta are the head's own), so that its errors name the caller's lengths."""
        alpha = None
        for h in range(self.num_heads):
            head = slice(h, h + 1)
            a = F.gmm_attention_weights(mu[..., head], variance[..., head], weights[..., head],
                                        memory.nu[:, h], memory.delta[:, h], self.window,
                                        self.window_radius, self.window_width, memory.lengths,
                                        out_lengths)
            alpha = a if alpha is None else alpha + a
        return alpha

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        step, variance, weights = self._parameters_of(queries)
        mu = torch.cumsum(step, dim=1)  # eq. 5 with mu_0 = 0
        w = self._weights(mu, variance, weights, self.prepare(memory, memory_lengths), out_lengths)
        self.last_alignment, self.last_mu = w, mu
        return _context(w, memory, memory_lengths), w

    def step(self, query: Tensor, memory: GmmMemory,
             mu_prev: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """One output step: query [B, Dq], the prepared memory and mu_{i-1} [B, H]
        (``initial_state`` at the first step) -> ``(context [B, Dh], weights [B, T],
        mu_i [B, H])``, mu_i = mu_{i-1} + Delta_i (eq. 5). Raises :class:`mona.ArgumentError`
        (a ``ValueError``) as :func:`mona.functional.gmm_attention_weights` does."""
        step, variance, weights = self._parameters_of(query.unsqueeze(1))
        mu = mu_prev.unsqueeze(1) + step
        w = self._weights(mu, variance, weights, memory, None)[:, 0]
        return F.attention_context(w, memory.values), w, mu[:, 0]
