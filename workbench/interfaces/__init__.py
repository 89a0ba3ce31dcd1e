"""What a user touches: the `workbench` command line (cli*.py, number formatting) and the Dash dashboard. Thin readers
of the analysis layer; the CLI's `profile`/`calibrate`/`merge` commands drive the measuring side and the store.
"""
