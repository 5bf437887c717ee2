"""What a worker's handler tells its consumer loop to do with a message, and the retry policy.

A handler never swallows a failure: it either finished the step (``DONE``: acknowledge), or asks
for the message again later (``RetryLater``: negative acknowledgement with a delay), or raises,
and the process stops. The message's delivery count bounds the retries: after the last one the
handler records a fault instead, so that no instance waits in a transitional state forever.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass


@dataclass(frozen=True)
class Done:
    """The step is complete (or was already, or was not ours): acknowledge the message."""


@dataclass(frozen=True)
class RetryLater:
    """A temporary failure: deliver the message again after ``delay`` seconds."""

    delay: float
    reason: str = ""


Outcome = Done | RetryLater

DONE = Done()


@dataclass(frozen=True)
class RetryPolicy:
    """Delays between attempts, in seconds; ``len(delays) + 1`` attempts in all."""

    delays: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0)
    # Deliveries beyond our own retries that come from a worker dying mid-step (a crash, a
    # deploy). Past them the message is poison: the step is recorded as failed instead.
    crash_allowance: int = 5

    @property
    def attempts(self) -> int:
        return len(self.delays) + 1

    @property
    def give_up_after(self) -> int:
        return self.attempts + self.crash_allowance

    def retry(self, attempt: int, reason: str) -> RetryLater | None:
        """After the ``attempt``-th delivery failed: when to try again, or None when out of attempts."""
        if attempt >= self.attempts:
            return None
        return RetryLater(self.delays[max(attempt, 1) - 1], reason)

    def retry_logged(
        self, attempt: int, reason: str, *, log: logging.Logger, step: str, server_id: str
    ) -> RetryLater | None:
        """``retry``, with a warning on ``log`` when there is another attempt to come."""
        retry = self.retry(attempt, reason)
        if retry is not None:
            log.warning(
                "%s %s: attempt %d failed, retrying in %.1fs: %s",
                step,
                server_id,
                attempt,
                retry.delay,
                reason,
            )
        return retry
