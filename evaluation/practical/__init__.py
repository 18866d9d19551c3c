"""Practical Python tasks scored as CodeInsight does (`python -m evaluation.practical`): program.py runs
one completion, assertions.py decides its unit tests outside the sandbox, score.py scores a file."""
