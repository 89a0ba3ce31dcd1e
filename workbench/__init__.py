"""Roofline workbench: profiler, store, comparison, hypotheses, CLI and dashboard.

Importing this package never imports CuPy, pynvml, Dash or Plotly: those load lazily where they are used, so
`import workbench` works on a machine with no GPU.
"""

__version__ = "0.1.0"
