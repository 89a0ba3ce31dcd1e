"""Where the shipped data lives: the one definition of the data directory (never relative to the working directory)."""

from __future__ import annotations

from pathlib import Path


def data_dir() -> Path:
    """The project's data/ folder (gpus.toml, workloads, hypotheses, calibration/, measurements/)."""
    return Path(__file__).resolve().parents[1] / "data"
