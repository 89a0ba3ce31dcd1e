"""Human formatting of SI quantities for the CLI and the dashboard (data stays in SI units everywhere else).

Every formatter takes a float in SI base units and returns a short string with a unit chosen by magnitude; NaN, None
and infinities become "—" so tables never show "nan".
"""

from __future__ import annotations

import math

MISSING = "—"


def _finite(x: float | None) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _scaled(x: float, units: tuple[tuple[float, str], ...], digits: int) -> str:
    """Pick the largest unit whose scale is <= |x| (the smallest unit for tiny values) and format with `digits`."""
    ax = abs(x)
    scale, unit = units[0]
    for s, u in units:
        if ax >= s:
            scale, unit = s, u
    v = x / scale
    return f"{_sig(v, digits)} {unit}"


def _sig(v: float, digits: int) -> str:
    """`digits` significant figures without scientific notation for 1e-3 <= |v| < 1e6 (at least 0 decimals)."""
    if v == 0:
        return "0"
    exponent = int(math.floor(math.log10(abs(v))))
    if abs(round(v, digits - 1 - exponent)) >= 10 ** (exponent + 1):  # 9.996 rounds up to 10.0, not 10.00
        exponent += 1
    decimals = max(0, digits - 1 - exponent)
    return f"{v:.{decimals}f}"


def fmt_time(s: float | None, digits: int = 3) -> str:
    """Seconds as ns / µs / ms / s, e.g. 4.63e-5 -> '46.3 µs'."""
    if not _finite(s):
        return MISSING
    return _scaled(float(s), ((1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s")), digits)


def fmt_bytes(b: float | None, digits: int = 3) -> str:
    """Bytes in decimal units (B, kB, MB, GB, TB), e.g. 1.8e8 -> '180 MB'."""
    if not _finite(b):
        return MISSING
    return _scaled(float(b), ((1.0, "B"), (1e3, "kB"), (1e6, "MB"), (1e9, "GB"), (1e12, "TB")), digits)


def fmt_bandwidth(bps: float | None, digits: int = 3) -> str:
    """Bytes per second as GB/s below 1 TB/s, TB/s above, e.g. 4.8e12 -> '4.80 TB/s'."""
    if not _finite(bps):
        return MISSING
    return _scaled(float(bps), ((1.0, "B/s"), (1e3, "kB/s"), (1e6, "MB/s"), (1e9, "GB/s"), (1e12, "TB/s")), digits)


def fmt_flops_rate(f: float | None, digits: int = 3) -> str:
    """FLOP per second as GFLOP/s / TFLOP/s / PFLOP/s, e.g. 9.89e14 -> '989 TFLOP/s'."""
    if not _finite(f):
        return MISSING
    units = ((1.0, "FLOP/s"), (1e6, "MFLOP/s"), (1e9, "GFLOP/s"), (1e12, "TFLOP/s"), (1e15, "PFLOP/s"))
    return _scaled(float(f), units, digits)


def fmt_flops(f: float | None, digits: int = 3) -> str:
    """A FLOP count, e.g. 1.8e8 -> '180 MFLOP'."""
    if not _finite(f):
        return MISSING
    units = ((1.0, "FLOP"), (1e3, "kFLOP"), (1e6, "MFLOP"), (1e9, "GFLOP"), (1e12, "TFLOP"))
    return _scaled(float(f), units, digits)


def fmt_clock(hz: float | None, digits: int = 4) -> str:
    """Hertz as MHz (clocks read best in MHz), e.g. 1.98e9 -> '1980 MHz'."""
    if not _finite(hz):
        return MISSING
    return f"{float(hz) / 1e6:.0f} MHz" if abs(float(hz)) >= 1e6 else _sig(float(hz), digits) + " Hz"


def fmt_ratio(x: float | None, digits: int = 3) -> str:
    """A speedup or ratio, e.g. 3.8498 -> '3.85×'."""
    if not _finite(x):
        return MISSING
    return f"{_sig(float(x), digits)}×"


def fmt_intensity(x: float | None, digits: int = 3) -> str:
    """Arithmetic intensity in FLOP/byte."""
    if not _finite(x):
        return MISSING
    return f"{_sig(float(x), digits)} FLOP/B"


def fmt_percent(x: float | None, digits: int = 3) -> str:
    """A fraction as a percentage, e.g. 0.913 -> '91.3%'."""
    if not _finite(x):
        return MISSING
    return f"{_sig(100.0 * float(x), digits)}%"
