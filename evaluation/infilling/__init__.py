"""HumanEval-infilling and exact match for fill-in-the-middle (`python -m evaluation.infilling`):
problems.py builds the benchmark from HumanEval's canonical solutions, prompts.py writes sample.py's
prefix/suffix prompts, program.py runs one middle in the sandbox, score.py scores a predictions file
by execution, exact.py scores SantaCoder-FIM-shaped files by exact match, cli.py is the command."""
