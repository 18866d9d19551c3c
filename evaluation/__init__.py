"""Benchmarks: prompts, sandboxed scoring with pass@k, and the scaling-ablation runner."""
