"""``torch.nn.Module``s for mona's attention mechanisms, for use inside a user's own model.

These are Python modules around the operators of :mod:`mona.functional` (the C++ modules of
``include/mona/nn/attention.h`` are not bound: their interface is built for mona's own
decoder and streaming runtime). Their parameters, initialisation and options follow the C++
``AttentionOptions`` (002 App. G): ``init_r = -4``, ``g = 1 / sqrt(d)``, pre-sigmoid noise of
standard deviation ``noise_std`` in training mode only (002 sec. 2.5).

Each module scores all output steps at once: ``forward(queries [B, U, Dq], memory [B, T, Dh],
memory_lengths=None, out_lengths=None)`` returns ``(contexts [B, U, Dh], weights [B, U, T])``
and keeps the expected alignment of its last call in ``last_alignment``. With an RNN decoder
whose query depends on the previous context, call :func:`mona.functional.monotonic_alignment_step`
step by step instead.
"""

import math
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from . import functional as F

__all__ = ["MonotonicEnergy", "AdditiveEnergy", "MonotonicAttention", "MochaAttention",
           "MatchaAttention", "SoftAttention"]


class AdditiveEnergy(nn.Module):
    """``e_j = v^T tanh(W_s s + W_h h_j + b)`` (002 eq. 15, 000 eq. 5): queries [B, U, Dq],
    memory [B, T, Dh] -> energies [B, U, T]."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0):
        super().__init__()
        d = attention_dim or memory_dim
        self.query_proj = nn.Linear(query_dim, d, bias=True)
        self.memory_proj = nn.Linear(memory_dim, d, bias=False)
        self.v = nn.Parameter(torch.empty(d).uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d)))

    def forward(self, queries: Tensor, memory: Tensor) -> Tensor:
        h = torch.tanh(self.query_proj(queries).unsqueeze(2) + self.memory_proj(memory).unsqueeze(1))
        return h @ self.v


class MonotonicEnergy(AdditiveEnergy):
    """``e_j = g v^T / ||v|| tanh(W_s s + W_h h_j + b) + r`` (002 eq. 16), g = 1/sqrt(d) and
    r = init_r initially (002 App. G)."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0,
                 init_r: float = -4.0):
        super().__init__(query_dim, memory_dim, attention_dim)
        d = self.v.numel()
        self.g = nn.Parameter(torch.tensor(1 / math.sqrt(d)))
        self.r = nn.Parameter(torch.tensor(float(init_r)))

    def forward(self, queries: Tensor, memory: Tensor) -> Tensor:
        h = torch.tanh(self.query_proj(queries).unsqueeze(2) + self.memory_proj(memory).unsqueeze(1))
        return h @ (self.g * self.v / self.v.norm()) + self.r


def _context(weights: Tensor, memory: Tensor) -> Tensor:
    return torch.bmm(weights, memory)  # [B, U, T] x [B, T, Dh]


class _Monotonic(nn.Module):
    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0,
                 init_r: float = -4.0, noise_std: float = 1.0):
        super().__init__()
        self.energy = MonotonicEnergy(query_dim, memory_dim, attention_dim, init_r)
        self.noise_std = noise_std
        self.last_alignment: Optional[Tensor] = None

    def p_choose(self, queries: Tensor, memory: Tensor) -> Tensor:
        """Selection probabilities sigmoid(e + noise) [B, U, T] (noise in training only)."""
        e = self.energy(queries, memory)
        if self.training and self.noise_std > 0:
            e = e + self.noise_std * torch.randn_like(e)
        return torch.sigmoid(e)


class MonotonicAttention(_Monotonic):
    """Hard monotonic attention trained in expectation (002 eqs. 13-16): the weights are the
    expected alignment alpha of :func:`mona.functional.monotonic_alignment`."""

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        alpha = F.monotonic_alignment(self.p_choose(queries, memory), memory_lengths, out_lengths)
        self.last_alignment = alpha
        return _context(alpha, memory), alpha


class MochaAttention(_Monotonic):
    """MoChA (000 eqs. 14-25): the expected alignment spread over chunks of ``chunk_size``
    entries by :func:`mona.functional.mocha_chunkwise` with an additive chunk energy."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0,
                 chunk_size: int = 4, init_r: float = -4.0, noise_std: float = 1.0):
        super().__init__(query_dim, memory_dim, attention_dim, init_r, noise_std)
        self.chunk_energy = AdditiveEnergy(query_dim, memory_dim, attention_dim)
        self.chunk_size = chunk_size

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        alpha = F.monotonic_alignment(self.p_choose(queries, memory), memory_lengths, out_lengths)
        beta = F.mocha_chunkwise(alpha, self.chunk_energy(queries, memory), self.chunk_size,
                                 memory_lengths, out_lengths)
        self.last_alignment = alpha
        return _context(beta, memory), beta


class MatchaAttention(_Monotonic):
    """MAtChA (000 App. C): chunks that span from the previous step's chosen entry to the
    current one, by :func:`mona.functional.matcha_chunkwise`."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0,
                 init_r: float = -4.0, noise_std: float = 1.0):
        super().__init__(query_dim, memory_dim, attention_dim, init_r, noise_std)
        self.chunk_energy = AdditiveEnergy(query_dim, memory_dim, attention_dim)

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        p = self.p_choose(queries, memory)
        alpha = F.monotonic_alignment(p, memory_lengths, out_lengths)
        alpha0 = torch.zeros_like(alpha[:, :1])
        alpha0[:, :, 0] = 1  # the initial alignment: all mass on entry 0 (002 sec. 2.2)
        alpha_prev = torch.cat([alpha0, alpha[:, :-1]], dim=1)
        beta = F.matcha_chunkwise(alpha_prev, p, self.chunk_energy(queries, memory),
                                  memory_lengths, out_lengths)
        self.last_alignment = alpha
        return _context(beta, memory), beta


class SoftAttention(nn.Module):
    """Soft attention (000 eqs. 4-6) with an additive energy and a masked softmax (the
    offline baseline)."""

    def __init__(self, query_dim: int, memory_dim: int, attention_dim: int = 0):
        super().__init__()
        self.energy = AdditiveEnergy(query_dim, memory_dim, attention_dim)
        self.last_alignment: Optional[Tensor] = None

    def forward(self, queries: Tensor, memory: Tensor, memory_lengths: Optional[Tensor] = None,
                out_lengths: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        w = F.masked_softmax(self.energy(queries, memory), memory_lengths, out_lengths)
        self.last_alignment = w
        return _context(w, memory), w
