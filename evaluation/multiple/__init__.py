"""MultiPL-E and bigcode-evaluation-harness formats, and scoring MultiPL-E's problems MultiPL-E's way."""
