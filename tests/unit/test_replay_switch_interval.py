"""A replay's switch interval (``projections.projector._switching_every``) holds while any replay
of the process runs and is the process's own again after the last, whatever ends them; its batch
sizes (``_growing``) start small and stay at the batch size."""

from __future__ import annotations

import itertools
import sys

import pytest

from projections.projector import REPLAY_SWITCH_INTERVAL, _growing, _switching_every


def test_the_interval_holds_while_any_replay_runs_and_is_restored_after_the_last() -> None:
    before = sys.getswitchinterval()
    with _switching_every(REPLAY_SWITCH_INTERVAL):
        assert sys.getswitchinterval() == pytest.approx(min(REPLAY_SWITCH_INTERVAL, before))
        with pytest.raises(RuntimeError), _switching_every(REPLAY_SWITCH_INTERVAL):  # another, failing
            raise RuntimeError("a replay failed")
        assert sys.getswitchinterval() == pytest.approx(min(REPLAY_SWITCH_INTERVAL, before))
    assert sys.getswitchinterval() == before


def test_the_batches_grow_from_the_first_to_the_batch_size() -> None:
    assert list(itertools.islice(_growing(250, 2000), 6)) == [250, 500, 1000, 2000, 2000, 2000]
    assert list(itertools.islice(_growing(250, 600), 4)) == [250, 500, 600, 600]
    assert list(itertools.islice(_growing(250, 50), 2)) == [50, 50]  # never above the batch size
