"""`python -m evaluation.multiple`: cli.py's command line."""

import quiet

quiet.setup()  # before Beam and TensorFlow are imported: no start-up lines

import sys  # noqa: E402

from evaluation.multiple import cli  # noqa: E402

sys.exit(cli.main())
