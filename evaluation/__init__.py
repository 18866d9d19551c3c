"""Benchmarks and their scoring. One sub-package per benchmark (humaneval/, iterative/, practical/),
none importing another; shared by all: prompts.py (benchmark prompts for sample.py), score.py (the
typed benchmarks in 12 languages), resumable.py (the one resumable scoring loop), beam_scoring.py (it
on Beam), passk.py, benchmark_data.py (the data codelm ships), selfcheck.py. Programs run in the
sandbox (sandbox/)."""
