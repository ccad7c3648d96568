"""Where fairseq's closed form of the expected alignment goes wrong (docs/python.md's table).

For source lengths T and three distributions of p_choose ([32, 8, T], seed 0), compares
mona.compat.fairseq.fairseq_closed_form (fairseq's alignment_train_cpu restated: clamped
exclusive cumprod, eps = 1e-6, in float32 as fairseq computes) with mona's exact alignment
(expected_alignment_from_p_choose in float64): the largest absolute error and the share of
rows (b, i) whose largest error exceeds 1e-3.

Usage: PYTHONPATH=python /usr/bin/python3 bench/python/fairseq_closed_form.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from mona.compat.fairseq import expected_alignment_from_p_choose, fairseq_closed_form  # noqa: E402

D = torch.float64
CASES = [
    ("sigmoid(N(-2, 2^2))", lambda s: torch.sigmoid(torch.randn(s, dtype=D) * 2 - 2)),
    ("U(0, 1)", lambda s: torch.rand(s, dtype=D)),
    ("hard: 90% sigmoid(N(-12, 2^2)), 10% sigmoid(N(4, 2^2))",
     lambda s: torch.where(torch.rand(s, dtype=D) < 0.9,
                           torch.sigmoid(torch.randn(s, dtype=D) * 2 - 12),
                           torch.sigmoid(torch.randn(s, dtype=D) * 2 + 4))),
]

print("| p_choose | src_len | max abs error | rows off by > 1e-3 |")
print("| --- | --- | --- | --- |")
for name, gen in CASES:
    torch.manual_seed(0)
    for T in [8, 16, 32, 64, 128, 500]:
        p = gen((32, 8, T))
        exact = expected_alignment_from_p_choose(p)
        err = (fairseq_closed_form(p.float()).double() - exact).abs()
        share = float((err.amax(-1) > 1e-3).double().mean())
        print(f"| {name} | {T} | {float(err.max()):.2g} | {100 * share:.0f}% |")
