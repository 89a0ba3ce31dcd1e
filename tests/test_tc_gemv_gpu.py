"""The tensor-core W4A16 GEMV (kernels/tcgemv/tc_gemv.py) on the GPU (run on the device: pytest -m gpu).

Float64 checks: fresh random inputs (never zeros), outputs poisoned with NaN, rel = ||y - ref|| / ||ref|| against the
reference of the dequantized weights, at every M bin edge and odd M (1, 2, 3, 7, 8, 9, 15, 16), on shapes with N
not a multiple of the 16-channel tile, K with fewer groups than warps and a remainder of the warps' group loop, group
sizes 64 and 256, both columns of the table (N = 4096 and 22016) and variants of every field. The output is rounded
to fp16 (and with wscale each weight once): tolerance 2e-3 (as w4a16_gemv).
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import reference as ref
from kernels import registry
from kernels.gemv import gemv
from kernels.tcgemv import tc_gemv

pytestmark = pytest.mark.gpu

TOL = 2e-3
SMALL = ((37, 128), (101, 640), (1029, 4096 + 128), (203, 11008))
LLM = ((22016, 4096), (4096, 11008), (6144, 4096))  # 6144: the middle column at M 9-16
VARIANTS = ({"warps": 4}, {"u": 1}, {"u": 4, "tiles": 2}, {"warps": 16, "u": 2, "minb": 2},
            {"wscale": True, "tiles": 3}, {"wscale": True, "tiles": 4, "warps": 4, "u": 1}, {"minb": 4})


def _check(M: int, N: int, K: int, seed: int, group_size: int | None = None, config: dict | None = None) -> float:
    runner = tc_gemv.TcGemvRunner(registry.get(tc_gemv.NAME), group_size=group_size, config=config)
    prob = runner.make(M, N, K, seed=seed, reference=True)
    gemv.poison_output(prob.out)
    runner.launch(prob)
    y = runner.output(prob)
    assert np.isfinite(y).all(), f"M={M} {N}x{K}: unwritten or NaN outputs"
    assert np.abs(prob.ref).max() > 0
    return ref.rel_error(y, prob.ref)


@pytest.mark.parametrize("M", [1, 2, 3, 7, 8, 9, 15, 16])
def test_small_shapes(cp, M):
    for i, (N, K) in enumerate(SMALL):
        err = _check(M, N, K, seed=500 * M + i)
        assert err < TOL, f"M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("M", [1, 5, 16])
def test_llm_shapes(cp, M):
    for i, (N, K) in enumerate(LLM):
        err = _check(M, N, K, seed=17 + 100 * M + i)
        assert err < TOL, f"M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("G", [64, 256])
def test_group_sizes(cp, G):
    for M in (1, 12):
        err = _check(M, 1029, 4096 + 2 * G, seed=9 + M, group_size=G)
        assert err < TOL, f"G={G} M={M}: rel err {err:.2e}"


@pytest.mark.parametrize("config", VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_variants(cp, config):
    for M in (1, 9, 16):
        for N, K in ((1029, 11008), (22016, 4096)):  # N = 1029: not a whole row tile, nor a whole set of 3 or 4
            err = _check(M, N, K, seed=3 + M, config=config)
            assert err < TOL, f"{config} M={M} {N}x{K}: rel err {err:.2e}"


def test_refuses_group_32(cp):
    with pytest.raises(Exception, match="multiple of 64"):
        tc_gemv.TcGemvRunner(registry.get(tc_gemv.NAME), group_size=32).check(1, 64, 256)
