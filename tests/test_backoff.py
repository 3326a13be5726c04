"""The one retry shape shared by the webhook sink and the journal source."""

import pytest

from matcher.backoff import Backoff


def test_delays_double_up_to_the_ceiling_and_reset_starts_over():
    b = Backoff(1.0, 5.0)
    assert [b.next_delay() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    b.reset()
    assert b.next_delay() == 1.0


def test_an_initial_delay_above_the_ceiling_is_capped_and_negative_delays_are_refused():
    assert Backoff(10.0, 3.0).next_delay() == 3.0
    with pytest.raises(ValueError):
        Backoff(-1.0, 1.0)
