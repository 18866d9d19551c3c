"""HumanEval as typed questions (questions.py; Python annotations as typed-format types are
evaluation/python_types.py, shared with the iterative protocol), and BabelCode's datasets in the same
typed format (babelcode.py); generation and translation prompts are evaluation/prompts.py's."""
