"""Where the workbench finds its files once installed (models.paths): the catalogue through importlib.resources, the
measured dataset through --data-dir / WORKBENCH_DATA / the checkout, and never a write into the installed packages.

"Installed" is simulated by pointing models.paths at a folder that is not a checkout (no pyproject.toml beside it);
scripts/wheel_check.sh checks the real wheel in a fresh venv.
"""

from __future__ import annotations

import pytest

from models import paths
from models.errors import InputError
from workbench.interfaces.cli import click_command, main

CATALOGUE_FILES = ("gpus.toml", "workloads.toml", "model/kernel-facts.json", "model/kernel-params.json")


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """models.paths as in a wheel: the code root is a site-packages-like folder, no checkout, no WORKBENCH_DATA."""
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(paths, "_CODE_ROOT", site)
    monkeypatch.delenv(paths.DATA_ENV, raising=False)
    return site


def test_the_checkout_is_found_and_holds_the_catalogue():
    data = paths.checkout_data_dir()
    assert data is not None and paths.catalogue_dir() == data and paths.installed_root() is None
    for name in CATALOGUE_FILES:
        assert (data / name).is_file(), name
    assert sorted((data / "hypotheses").glob("*.toml"))


def test_the_catalogue_is_read_through_importlib_resources_when_installed(installed):
    assert paths.checkout_data_dir() is None and paths.installed_root() == installed
    root = paths.catalogue_dir()  # the `workbench_data` package (setup.py maps data/ to it)
    assert root.name != "site-packages"
    for name in CATALOGUE_FILES:
        assert (root / name).is_file(), name


def test_the_dataset_is_the_option_then_the_environment_then_the_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.DATA_ENV, raising=False)
    assert paths.dataset_dir() == paths.checkout_data_dir()
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "env"))
    assert paths.dataset_dir() == tmp_path / "env"
    assert paths.dataset_dir(tmp_path / "flag") == tmp_path / "flag"


def test_an_installed_workbench_without_a_dataset_says_where_it_looked(installed):
    with pytest.raises(InputError) as exc:
        paths.dataset_dir()
    message = str(exc.value)
    assert "--data-dir" in message and paths.DATA_ENV in message and "\n" not in message


@pytest.mark.parametrize("argv", [["export", "-"], ["recommend"], ["model-check"], ["validate"],
                                  ["predict", "--tier", "calibrated"]])
def test_each_command_refuses_in_one_line_without_a_dataset(installed, argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no measured dataset") and err.count("\n") == 1


def test_the_datasheet_tier_needs_no_dataset(installed, capsys):
    assert main(["predict", "--shape", "4096x4096", "--gpu", "h200-sxm", "--batch", "1"]) == 0
    assert "4096x4096" in capsys.readouterr().out


def test_nothing_is_written_into_the_installed_packages(installed, tmp_path, capsys):
    target = installed / "workbench_data" / "model" / "kernel-facts.json"
    with pytest.raises(InputError, match="never writes"):
        paths.refuse_installed(target, "--out")
    assert paths.refuse_installed(tmp_path / "mine.json", "--out") == tmp_path / "mine.json"
    assert main(["kernel-facts", "--out", str(target)]) == 2
    assert main(["model-fit", "--data-dir", str(paths.catalogue_dir()), "--out", str(installed / "p.json")]) == 2
    assert "never writes" in capsys.readouterr().err
    assert not any(installed.rglob("*.json"))


def test_every_data_option_has_one_spelling_and_its_alias():
    """--data-dir, alias --data, on every command that takes a data directory (new commands included)."""
    spelled = {}
    for name, command in click_command().commands.items():
        for param in command.params:
            opts = set(param.opts)
            if opts & {"--data", "--data-dir"}:
                spelled[name] = opts
    assert {"export", "validate", "report", "recommend", "predict", "model-check", "model-fit", "serve", "profile",
            "calibrate"} <= set(spelled)
    assert all(opts == {"--data-dir", "--data"} for opts in spelled.values()), spelled
