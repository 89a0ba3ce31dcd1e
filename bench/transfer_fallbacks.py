"""Fallback rules for the read fraction of a memory technology without a fitted factor (docs/transfer.md, "The
A100's bandwidth"), checked as `workbench model-check --by-gpu` checks the shipped rule: A100 and L40S left out of
the transfer fit in turn, the H100 (our profiler, never calibrated) held out.

    PYTHONPATH=. python3 bench/transfer_fallbacks.py [RULE ...]      (default: all; no GPU needed)

Rules (models.transfer.TransferFactors.read_fraction_for; a technology with its own factor always keeps it):
  class          the shipped rule: the median of the technology's class (HBM, GDDR), else of every factor
  pooled         the median of every factor, whatever the class
  public         the median of the factors fitted on public timings (not the reference's calibrate read), else all
  generation     the factors of the same class as a line in the year of the technology's first products (HBM2
                 2016, HBM2e 2019, HBM3 2022, HBM3e 2023; GDDR6 2018, GDDR6X 2020, GDDR7 2024) where the class has
                 two, else the class median
  generation-all the same line through every factor, either class
Prints, per GPU, the median (signed) and p90 of |predicted / measured - 1| of the time, all schemes and bf16.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

FIRST_PRODUCTS = {"HBM2": 2016, "HBM2e": 2019, "HBM3": 2022, "HBM3e": 2023, "GDDR6": 2018, "GDDR6X": 2020,
                  "GDDR7": 2024}
RULES = ("class", "pooled", "public", "generation", "generation-all")


def _line(values: dict[str, float], tech: str) -> float:
    x = np.array([FIRST_PRODUCTS[k] for k in values], dtype=np.float64)
    slope, icept = np.polyfit(x, np.array(list(values.values())), 1)
    return float(np.clip(slope * FIRST_PRODUCTS[tech] + icept, 0.2, 1.0))


def rule(name: str, shipped):
    from models.hardware import MEMORY_TECHS

    def read_fraction_for(self, tech: str) -> tuple[float, str]:
        if tech in self.read_fraction or name == "class":
            return shipped(self, tech)
        values = {k: f.value for k, f in self.read_fraction.items()}
        if name == "pooled":
            return float(np.median(list(values.values()))), name
        if name == "public":
            public = [f.value for f in self.read_fraction.values() if f.points > 0]
            return float(np.median(public or list(values.values()))), name
        same = {k: v for k, v in values.items() if MEMORY_TECHS[k] == MEMORY_TECHS.get(tech)}
        pool = same if name == "generation" else values
        return (_line(pool, tech), name) if len(pool) >= 2 else shipped(self, tech)

    return read_fraction_for


def main() -> None:
    import models.transfer as transfer
    from workbench.interfaces.cli_model import check_by_gpu

    names = sys.argv[1:] or list(RULES)
    if any(n not in RULES for n in names):
        sys.exit(f"unknown rule; known: {', '.join(RULES)}")
    shipped = transfer.TransferFactors.read_fraction_for
    data = Path(__file__).resolve().parents[1] / "data"
    for name in names:
        transfer.TransferFactors.read_fraction_for = rule(name, shipped)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                check_by_gpu(data, None, False)
        finally:
            transfer.TransferFactors.read_fraction_for = shipped
        print(name)
        for line in out.getvalue().splitlines():
            cells = line.split()
            if "GPU out" in line and len(cells) > 9 and cells[5] in ("all", "bf16"):
                print(f"  {cells[4]:14s} {cells[5]:5s} {cells[8]:>6s} ({cells[7]}) / {cells[9]}")


if __name__ == "__main__":
    main()
