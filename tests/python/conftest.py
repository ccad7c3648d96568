# Shared helpers of the pytest suite. ctest puts this checkout's python/ on PYTHONPATH; run by
# hand, `PYTHONPATH=python /usr/bin/python3 -m pytest tests/python` (or after `make python`).
import os
import sys

import pytest
import torch

_here = os.path.dirname(os.path.abspath(__file__))
_python = os.path.join(os.path.dirname(os.path.dirname(_here)), "python")
if _python not in sys.path:
    sys.path.insert(0, _python)

import mona  # noqa: E402


def lengths_mask(lens, n):
    """[B, n] bool: entry j < lens[b]."""
    return torch.arange(n).unsqueeze(0) < lens.unsqueeze(1)


def random_p(shape, dtype=torch.float64, seed=0, low=0.05, high=0.95):
    """Selection probabilities away from 0 and 1, so that finite differences of step 1e-6
    (gradcheck's) stay inside [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    return (low + (high - low) * torch.rand(shape, generator=g, dtype=torch.float64)).to(dtype)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
