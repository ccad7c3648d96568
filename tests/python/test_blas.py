# mona.use_best_blas_kernels: OpenBLAS's kernel family for PyTorch's matrix products
# (include/mona/nn/threads.h), in a fresh interpreter each, since the switch is per process.
import os
import subprocess
import sys

import pytest

PROBE = r"""
import os, torch, mona
a, b = torch.randn(64, 192, dtype=torch.float32), torch.randn(192, 512, dtype=torch.float32)
family = mona.use_best_blas_kernels()
exact = a.double() @ b.double()
# K = 192 float products and sums: within K float ulps of the sum of magnitudes.
bound = 192 * 2.0 ** -24 * (a.double().abs() @ b.double().abs())
ok = bool(((a @ b).double() - exact).abs().le(bound).all())
print(family, ok, os.environ.get("OPENBLAS_CORETYPE", "<unset>"))
"""


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def run_probe(coretype):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype is not None:
        env["OPENBLAS_CORETYPE"] = coretype
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_a_prescott_fall_back_is_replaced_and_products_stay_right():
    family, ok, env_after = run_probe(None)
    assert ok == "True"
    assert env_after == "<unset>"  # the environment is left as it was
    assert family != ""  # Debian's OpenBLAS is PyTorch's BLAS here (scripts/install-deps.sh)
    if {"avx2", "fma"} <= cpu_flags():  # OpenBLAS has vector kernels for this CPU
        assert family.lower() != "prescott", family


@pytest.mark.parametrize("forced", ["Prescott", "Haswell"])
def test_openblas_coretype_stands(forced):
    if forced == "Haswell" and not {"avx2", "fma"} <= cpu_flags():
        pytest.skip("this CPU cannot run OpenBLAS's Haswell kernels")
    family, ok, env_after = run_probe(forced)
    assert family == forced
    assert ok == "True"
    assert env_after == forced
