"""Where the workbench's files live: the one definition of both homes (never relative to the working directory).

- The catalogue (shipped, read-only): gpus.toml, workloads.toml, model/*.json (kernel facts, fitted parameters),
  hypotheses/*.toml. Its single home is the repository's data/ folder, which pyproject.toml installs as the package
  `workbench_data`; it is read through importlib.resources, so a wheel works from any folder.
- The dataset (measured, and what the user writes: measurements/, calibration/, model-fit's parameters): the folder
  given with --data-dir (alias --data), else the one in the environment variable WORKBENCH_DATA, else the checkout's
  data/ when this code runs from a checkout. An installed wheel has no dataset of its own, and nothing is ever
  written into site-packages.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

from models.errors import InputError

CATALOGUE_PACKAGE = "workbench_data"  # pyproject.toml: [tool.setuptools.package-dir] workbench_data = "data"
DATA_ENV = "WORKBENCH_DATA"
_CODE_ROOT = Path(__file__).resolve().parents[1]  # the checkout, or site-packages for an installed wheel


def checkout_data_dir() -> Path | None:
    """The checkout's data/ folder when this code runs from a checkout (a source tree or an editable install), else
    None (an installed wheel)."""
    data = _CODE_ROOT / "data"
    return data if (_CODE_ROOT / "pyproject.toml").is_file() and (data / "gpus.toml").is_file() else None


def catalogue_dir() -> Path:
    """The shipped catalogue: the checkout's data/ in a checkout, the installed `workbench_data` package otherwise."""
    checkout = checkout_data_dir()
    if checkout is not None:
        return checkout
    try:
        root = importlib.resources.files(CATALOGUE_PACKAGE)
    except ModuleNotFoundError:
        raise InputError(f"the catalogue package {CATALOGUE_PACKAGE} is not installed; reinstall roofline-workbench "
                         "(pip install .)") from None
    return Path(str(root))  # pip installs a wheel unzipped: the package is a folder on disk


def installed_root() -> Path | None:
    """The folder the packages are installed in (site-packages) when running from a wheel; None in a checkout."""
    return None if checkout_data_dir() is not None else _CODE_ROOT


def dataset_dir(given: str | Path | None = None) -> Path:
    """The measured dataset: `given` (--data-dir), else $WORKBENCH_DATA, else the checkout's data/; one line naming
    all three when none is there. Whether the folder exists is the caller's check (it names its option)."""
    if given is not None:
        return Path(given)
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env)
    checkout = checkout_data_dir()
    if checkout is not None:
        return checkout
    raise InputError(f"no measured dataset: give --data-dir DIR or set {DATA_ENV}=DIR (a folder holding "
                     "measurements/ and calibration/); an installed workbench has no checkout data/ to fall back on")


def refuse_installed(path: str | Path, option: str) -> Path:
    """`path`, unless it lies inside the installed packages (site-packages), which the workbench never writes."""
    p = Path(path)
    root = installed_root()
    if root is not None and p.resolve().is_relative_to(root.resolve()):
        raise InputError(f"{option} {p}: inside the installed package ({root}), which the workbench never writes; "
                         "give a path in a data folder of yours (--data-dir DIR or --out FILE)")
    return p


def data_dir() -> Path:
    """The shipped catalogue's folder, under the name code written before the two homes were told apart uses (the
    kernel tier's parameter files): catalogue_dir(). The dataset is dataset_dir() (commands: cli_args.DataDirOpt and
    cli_args.dataset; their writes checked by cli_args.writable_target)."""
    return catalogue_dir()
