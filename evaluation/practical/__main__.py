"""`python -m evaluation.practical`: score.py's command line."""

import quiet

quiet.setup()  # before Beam and TensorFlow are imported: no start-up lines

import sys  # noqa: E402

from evaluation.practical import score  # noqa: E402

sys.exit(score.main())
