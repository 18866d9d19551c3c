"""The iterative example-based protocol of seed 001 (`python -m evaluation.iterative`): tasks.py builds
the tasks, protocol.py plays one round, run.py runs the episodes, report.py reports them."""
