"""Batch runs: one agent over many inputs (``thinkflow batch``), on local threads or as Ray tasks.

:mod:`~thinkflow.batch.inputs` reads the inputs file, :mod:`~thinkflow.batch.input_checks` holds each input against
the agent before anything runs, :mod:`~thinkflow.batch.results` keeps the crash-safe results file,
:mod:`~thinkflow.batch.worker` turns one input into one run, :mod:`~thinkflow.batch.runner` drives a pool, and
:mod:`~thinkflow.batch.ray_pool` is the Ray backend (the only importer of ray).
"""
