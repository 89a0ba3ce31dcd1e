"""The analytical roofline model: schemes (byte/FLOP accounting), GPU catalogue, workloads, vectorized prediction.

Pure Python/NumPy/pandas; reads only its own catalogues in `data/`; never touches CUDA.
"""
