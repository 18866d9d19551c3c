"""Experiments over many training runs: the scaling ablation (sizes x mixtures)."""
