"""Recovery at start: finish what a previous run of this host's worker left under way.

A worker killed mid-step (``kill -9``, a power cut) leaves its message unacknowledged; JetStream
redelivers it, but only after the ack wait (two minutes). Nova's compute service does the same
check at start (``_init_instance``): before consuming, the worker looks at every instance its host
holds a claim for and, if one is in a transitional task state, runs that step again now:
``spawning``, or placed here and not begun (the killed run took the placement and died before the
spawn began) → spawn, ``deleting`` → tear down, an action's task state → that action, a resize or
migration at a step of this host's → that step. Every step is idempotent and checks the
instance's state first, so the redelivered message, when it comes, finds the step done and is
acknowledged; a step that fails here is recorded like any other failure.

A step that kills the worker every time must not turn this into a crash loop: before running a
step the worker notes it in ``<marks>/recovering-<id>`` (a count, on the host's disk), and removes
the note once the step returned. A step already tried ``limit`` times this way is left to the
redelivered message, whose delivery count ends it as a fault (the poison rule of ``workers.outcome``).

A server whose events cannot be loaded (its history holds an event no code can decode: see
``stratus.quarantine``), or whose step fails with an error no step classifies, is logged at ERROR
and left: the host starts and serves its other servers (the step's mark counts the attempt).
"""

from __future__ import annotations

import logging
from pathlib import Path

from commands import loaders
from commands.actions import ACTIONS
from commands.bus import MessageBus
from commands.errors import NotFound
from commands.states import TaskState, VmState
from stratus.quarantine import reason
from workers.compute import DELETION_REQUESTED, SCHEDULED
from workers.consumer import STORE_TEMPORARY
from workers.outcome import RetryLater
from workers.steps import HostSteps

log = logging.getLogger(__name__)

_ACTION_BY_TASK = {a.task_state: key for key, a in ACTIONS.items()}
_UNDER_WAY = (TaskState.SPAWNING, TaskState.DELETING, *_ACTION_BY_TASK)


def recover(
    bus: MessageBus,
    hostname: str,
    steps: HostSteps,
    *,
    marks: Path,
    limit: int = 3,
) -> list[str]:
    """Run again the steps this host left under way; the ids of the instances it touched."""
    compute, power, moves = steps.compute, steps.power, steps.moves
    try:
        host = loaders.host(bus.uow, hostname)
    except NotFound:
        return []
    # the instances with a claim here, and those whose migration holds one (they are moving away)
    claimed = sorted({host.migrations.get(key, key) for key in host.claims})
    touched = []
    for server_id in claimed:
        try:
            inst = loaders.instance(bus.uow, server_id)
        except NotFound:
            continue
        except STORE_TEMPORARY:
            raise
        except Exception as e:  # its history holds an event no code can take: left to the operator
            log.error("not recovering %s: its events cannot be loaded (%s: %s)", server_id, type(e).__name__,
                      reason(e))  # fmt: skip
            continue
        task = inst.task_state
        move = moves.pending(inst)
        # placed here and not yet begun: the killed run took the `Scheduled` message (unacknowledged
        # for the ack wait) and died before it recorded the spawn's start
        placed = inst.vm_state == VmState.BUILDING and task is None
        if move is None and task not in _UNDER_WAY and not placed:
            continue
        mark = marks / f"recovering-{server_id}"
        tries = int(mark.read_text() or 0) if mark.is_file() else 0
        if tries >= limit:
            log.error("not recovering %s (%s) again: tried %d times", server_id, task, tries)
            continue
        marks.mkdir(parents=True, exist_ok=True)
        mark.write_text(str(tries + 1))
        try:
            if move is not None:
                outcome = moves.handle(move, server_id, attempt=1)
            elif task == TaskState.SPAWNING or placed:
                outcome = compute.handle(SCHEDULED, server_id, attempt=1)
            elif task == TaskState.DELETING:
                outcome = compute.handle(DELETION_REQUESTED, server_id, attempt=1)
            else:  # an action (the filter above let nothing else through)
                outcome = power.handle(_ACTION_BY_TASK[str(task)], server_id, attempt=1)
        except STORE_TEMPORARY:
            raise
        except Exception as e:  # unclassified: the mark keeps counting, the host starts all the same
            log.error("recovering %s (%s) failed: %s: %s", server_id, task, type(e).__name__, reason(e))
            continue
        mark.unlink()
        touched.append(server_id)
        if isinstance(outcome, RetryLater):
            # A temporary failure: the redelivered message retries it with the usual backoff.
            log.warning("recovering %s (%s): %s; left to the redelivery", server_id, task, outcome.reason)
        else:
            log.info("recovered %s: %s finished", server_id, task)
    return touched
