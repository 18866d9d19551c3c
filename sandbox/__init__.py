"""The sandbox: compile and run untrusted programs of 12 languages under limits, and judge what they
record. It knows nothing of benchmarks, sampling or the data pipeline.

  batching.execute_all(renderer, jobs, limits) -> executions   (the one entry the benchmarks use)

Inside: execution.py (one program in bubblewrap), batching.py (many programs of a language, built
together where the renderer can), judge.py (records -> per-test verdicts, outside the box), typed.py
(language-neutral types and values), recorded_values.py (plain data across the wall), renderers/ (one
module per language: a typed question -> its prompt and test program).
"""
