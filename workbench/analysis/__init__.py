"""Analysis of stored rows: prediction joined to measurement (every tier, the kernel tier from
data/model/kernel-facts.json), speedups and crossovers, hypotheses and their verdicts, reports, the model check,
quantization error and recommendations.

Reads workbench.storage and models/; never imports the measuring side or the kernel registry.
"""
