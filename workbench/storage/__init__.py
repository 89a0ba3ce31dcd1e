"""The store: the row schema, Parquet/CSV reading and atomic writing, the locks that guard outputs and GPUs, and the
merge of datasets from several machines. The bottom of the workbench: imports nothing else from it.
"""
