"""`python -m evaluation.iterative`: run.py's command line."""

import quiet

quiet.setup()  # before TensorFlow, JAX and Beam are imported

import sys  # noqa: E402

from evaluation.iterative import run  # noqa: E402

sys.exit(run.main())
