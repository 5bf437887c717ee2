"""Reconciliation: make the log say what the hypervisor actually runs (Nova's power-state sync).

Periodically, the hypervisor worker compares its host's guests with the instances the log places
there (the host's claims):

- a server at rest whose guest stopped or crashed on its own is recorded SHUTOFF
  (``Instance.PowerStateSynced``, vm_state stopped), one whose guest vanished goes to ERROR, and
  any other disagreement in power state is recorded as observed;
- a guest named like an instance but unknown on this host is a stray, recorded on the host's
  ``GuestCensus``; if the log shows its instance deleted it is an orphan and is destroyed, else it
  is left alone for an operator.

Servers with a task (a spawn, an action, a delete under way) are skipped: the step under way owns
the guest; so are servers whose history holds an event the trust check refuses (docs/trust.md),
logged, while the others are reconciled. Events are recorded only when something changed, so a
quiet host adds nothing to the log.
Domains are listed before the claims are read: a guest is only ever created after its claim, so a
guest being spawned is never taken for a stray. A server's power state is read again after the server
is loaded from the log and before its sync is appended under the server's version: a listing taken
while a spawn was between ``defineXML`` and ``create`` once recorded a just-spawned server SHUTOFF.
"""

from __future__ import annotations

import functools
import logging
import threading

from commands import loaders
from commands.bus import MessageBus
from commands.census import DESTROYED, LEFT_ALONE
from commands.errors import NotFound
from commands.servers.reconcile import RecordStrayGuests, SyncPowerState, deleted_instance
from commands.states import PowerState
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore.signing import UntrustedEvent
from workers.consumer import STORE_TEMPORARY
from workers.virt import DomainNotFound, TemporaryVirtError, VirtDriver

log = logging.getLogger(__name__)

INSTANCE_PREFIX = "instance-"
_TEMPORARY: tuple[type[Exception], ...] = (TemporaryVirtError, *STORE_TEMPORARY)


class Reconciler:
    """Compares one host's guests with what the log places there and records the differences."""

    def __init__(self, bus: MessageBus, driver: VirtDriver, hostname: str) -> None:
        self._bus = bus
        self._driver = driver
        self.hostname = hostname

    def _observe(self, uuid: str) -> tuple[int, bool]:
        """The guest's power state now, looked at after its server was loaded (the listing in
        ``once`` may predate the end of a spawn or action the loaded server already shows)."""
        try:
            return self._driver.power_state(uuid), False
        except DomainNotFound:
            return PowerState.NOSTATE, True

    def once(self) -> int:
        """One comparison; how many servers or strays it recorded something for."""
        domains = {d.uuid: d for d in self._driver.list_domains()}
        try:
            claimed = set(loaders.host(self._bus.uow, self.hostname).claims)
        except NotFound:
            return 0  # not registered yet
        recorded = 0
        for server_id in sorted(claimed):
            dom = domains.get(server_id)
            observed = dom.power_state if dom is not None else PowerState.NOSTATE
            observe = functools.partial(self._observe, server_id)
            command = SyncPowerState(server_id, observed, missing=dom is None, observe=observe)
            try:
                changed = self._bus.handle(command)
            except NotFound:
                continue  # deleted meanwhile
            except UntrustedEvent as e:  # its history holds a refused event: the operator's, not ours
                log.error("not reconciling server %s: %s", server_id, e)
                continue
            if changed:
                log.warning("server %s: hypervisor reports power state %d, recorded", server_id, observe()[0])
                recorded += 1
        strays: dict[str, tuple[str, int, str]] = {}
        for uuid, dom in sorted(domains.items()):
            if uuid in claimed or not dom.name.startswith(INSTANCE_PREFIX):
                continue
            try:
                self._driver.power_state(uuid)
            except DomainNotFound:
                continue  # gone meanwhile (a delete finishing as we looked)
            action = LEFT_ALONE
            if self._deleted(uuid):
                log.warning("destroying orphan guest %s (its instance is deleted)", dom.name)
                self._driver.destroy(uuid)
                action = DESTROYED
            strays[uuid] = (dom.name, dom.power_state, action)
        if self._bus.handle(RecordStrayGuests(self.hostname, strays)):
            recorded += len(strays)
        return recorded

    def _deleted(self, uuid: str) -> bool:
        """Whether the log shows a stray guest's instance deleted; not when its history holds a
        refused event (a forged ``Deleted`` must not destroy a guest): the guest is left alone."""
        try:
            return deleted_instance(self._bus.uow, uuid)
        except UntrustedEvent as e:
            log.error("leaving stray guest %s alone: %s", uuid, e)
            return False


def run_periodically(
    reconciler: Reconciler,
    stop: threading.Event,
    interval: float,
    actor: Actor,
    wake: threading.Event | None = None,
) -> threading.Thread:
    """Reconcile every ``interval`` seconds, and at once when ``wake`` is set (a libvirt lifecycle
    event), in a thread until ``stop`` is set (set ``wake`` too, to end the wait); failures are
    logged and tried again next round: the thread never dies of one."""
    wake = wake or threading.Event()

    def loop() -> None:
        while not stop.is_set():
            wake.wait(interval)
            wake.clear()
            if stop.is_set():
                return
            try:
                with acting(CommandContext(actor=actor)):
                    reconciler.once()
            except _TEMPORARY as e:
                log.warning(
                    "reconciliation of %s failed, trying again in %.0fs: %s", reconciler.hostname, interval, e
                )
            except Exception:  # anything else: say so, and keep the host reconciling
                log.exception("reconciliation of %s failed, trying again in %.0fs", reconciler.hostname,
                              interval)  # fmt: skip

    thread = threading.Thread(target=loop, name=f"reconcile-{reconciler.hostname}", daemon=True)
    thread.start()
    return thread
