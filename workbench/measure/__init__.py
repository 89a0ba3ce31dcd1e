"""Measuring, on a GPU: the timing loop, NVML sampling, the environment of a run, calibration and its
microbenchmarks, the profiler's sweep, and its spread over several GPUs (a worker per GPU) or a Ray cluster.

Writes what it measures through workbench.storage; imports nothing from analysis or the interfaces. CuPy, pynvml,
torch and ray load lazily, inside the functions that use them.
"""
