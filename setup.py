"""The package list, which pyproject.toml cannot say alone: the repository's data/ folder (the shipped catalogue:
gpus.toml, workloads.toml, model/*.json, hypotheses/*.toml) installs as the package `workbench_data`
(models.paths.CATALOGUE_PACKAGE), so that it keeps one home in the checkout and a wheel works from any folder.
Everything else (metadata, dependencies, package data) is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

setup(
    packages=find_namespace_packages(include=["workbench*", "kernels*", "models*"]) + ["workbench_data"],
    package_dir={"workbench_data": "data"},
)
