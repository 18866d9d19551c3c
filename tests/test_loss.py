import numpy as np

from model.loss import cross_entropy_with_z_loss


def test_loss_matches_numpy_reference():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 5, 11)).astype(np.float32) * 3
  targets = rng.integers(0, 11, size=(2, 5))
  weights = rng.integers(0, 2, size=(2, 5)).astype(np.float32)
  coefficient = 1e-2

  log_z = np.log(np.exp(logits.astype(np.float64)).sum(-1))
  nll = log_z - np.take_along_axis(logits, targets[..., None], -1)[..., 0]
  z = coefficient * log_z ** 2

  sums = cross_entropy_with_z_loss(logits, targets, weights, z_loss=coefficient)
  np.testing.assert_allclose(sums.loss, ((nll + z) * weights).sum(), rtol=1e-5)
  np.testing.assert_allclose(sums.z_loss, (z * weights).sum(), rtol=1e-5)
  assert float(sums.weight) == weights.sum()


def test_zero_weights_contribute_nothing():
  logits = np.random.default_rng(1).normal(size=(1, 4, 7)).astype(np.float32)
  targets = np.array([[1, 2, 3, 4]])
  full = cross_entropy_with_z_loss(logits, targets, np.array([[1, 1, 0, 0]], np.float32))
  head = cross_entropy_with_z_loss(logits[:, :2], targets[:, :2], np.ones((1, 2), np.float32))
  np.testing.assert_allclose(full.loss, head.loss, rtol=1e-6)
  assert float(full.weight) == 2.0
