import pytest

from data.unimax import expected_epochs, natural_rates, unimax_allocation, unimax_rates


def test_hand_worked_example():
  # Budget 100 over sizes 5, 20, 1000 with N = 2: the smallest is capped at 10 (2 epochs), the next
  # would get 45 but is capped at 40, the largest takes the remaining 50.
  sizes = {"a": 5, "b": 20, "c": 1000}
  assert unimax_allocation(sizes, 100, 2) == {"a": 10, "b": 40, "c": 50}
  assert unimax_rates(sizes, 100, 2) == pytest.approx({"a": 0.1, "b": 0.4, "c": 0.5})


def test_uniform_when_the_budget_is_small():
  sizes = {"a": 100, "b": 1000, "c": 5000}
  assert unimax_rates(sizes, 30, 1) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


@pytest.mark.parametrize("max_epochs", [1, 2, 3, 4])
def test_rates_sum_to_one_and_epochs_respect_the_cap(max_epochs):
  sizes = {"java": 3695, "python": 1680, "cpp": 1668, "go": 309, "rust": 93, "julia": 3, "haskell": 2}
  budget = 0.6 * sum(sizes.values()) * max_epochs
  rates = unimax_rates(sizes, budget, max_epochs)
  assert sum(rates.values()) == pytest.approx(1.0)
  epochs = expected_epochs(rates, sizes, budget)
  assert max(epochs.values()) <= max_epochs + 1e-9
  assert epochs["haskell"] == pytest.approx(max_epochs)  # the smallest languages hit the cap
  # Once one language is not capped, no larger one is: epochs never rise with size.
  by_size = [epochs[n] for n in sorted(sizes, key=sizes.get)]
  assert all(a >= b - 1e-9 for a, b in zip(by_size, by_size[1:]))
  assert by_size[-1] < max_epochs


def test_one_language_gets_everything():
  assert unimax_rates({"go": 7}, 100, 1) == {"go": 1.0}


def test_empty_languages_get_zero_and_bad_input_is_an_error():
  assert unimax_rates({"a": 0, "b": 10, "c": 10}, 10, 1) == {"a": 0.0, "b": 0.5, "c": 0.5}
  with pytest.raises(ValueError, match="no languages"):
    unimax_rates({}, 10, 1)
  with pytest.raises(ValueError, match="every language is empty"):
    unimax_rates({"a": 0}, 10, 1)
  with pytest.raises(ValueError, match="'b'"):
    unimax_rates({"a": 1, "b": -1}, 10, 1)
  with pytest.raises(ValueError, match="budget"):
    unimax_rates({"a": 1}, 0, 1)
  with pytest.raises(ValueError, match="max_epochs"):
    unimax_rates({"a": 1}, 10, 0)


def test_natural_rates_are_proportional():
  assert natural_rates({"a": 1, "b": 3}) == {"a": 0.25, "b": 0.75}
