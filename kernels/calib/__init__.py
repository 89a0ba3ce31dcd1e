"""Calibration microbenchmarks: calib.cu (the read curve, FMA, dequantization and mma.sync ceilings that `workbench
calibrate` measures, loaded by workbench.measure.calibrate) and wgmma_rate.cu (bench/bench_wgmma_rate.py).
CUDA sources only: they declare no registry kernels; the terms they measure are named in models.kernel_terms."""
