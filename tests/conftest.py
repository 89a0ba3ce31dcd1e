"""Shared fixtures: the CuPy module when a CUDA device is present (GPU tests skip cleanly without one)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cp():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception:  # CUDARuntimeError without a driver, or an import-time failure of the runtime
        pytest.skip("no CUDA device")
    return cupy


@pytest.fixture(scope="session")
def cupy(cp):
    return cp
