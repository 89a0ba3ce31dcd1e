"""The shipped catalogue, installed as the package `workbench_data` (setup.py maps this folder to it) and read through
importlib.resources (models.paths.catalogue_dir). The measured dataset (measurements/, calibration/) stays out of the
wheel: an installed workbench finds it through --data-dir or WORKBENCH_DATA."""
