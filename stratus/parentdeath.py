"""Children that do not outlive their parent: the parent-death signal for the servers Stratus starts.

The kernel's embedded servers (``stratus.natsserver``, ``stratus.postgres``) and the supervisor of
``stratus run`` (``processes.supervisor``) start child processes; a parent killed outright (SIGKILL,
a crash) must not leave them running on its ports and data directories.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys
from collections.abc import Callable


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when its parent dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    prctl = libc.prctl
    pr_set_pdeathsig = 1
    sigterm = int(signal.SIGTERM)

    def preexec() -> None:
        # Runs in the forked child: only the already-resolved C call, nothing that takes locks.
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)

    return preexec
