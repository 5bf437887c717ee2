"""Random command sequences against the domain, held to a simple model of what must always hold.

A Hypothesis state machine creates flavors' servers in two projects, places them on small hosts,
fails, spawns and deletes them, and changes quota limits, through the real command handlers on a
real JetStream log, in whatever order it draws. After every step:

- a project's quota usage (its ``ProjectUsage`` aggregate) equals the sum over its live servers,
  and never passes a limit it was under;
- a host's claims are exactly the servers placed on it and not yet released, within its capacity
  (total x allocation ratio) for every resource;
- every server is in a state the model allows (building, active, error or gone);
- a refused command (over quota, no room, an illegal state) appends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from commands.app import Stratus
from commands.errors import DomainError, InsufficientResources, QuotaExceeded
from commands.flavors.create import CreateFlavor
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FailInstance, FinishSpawning, StartSpawning
from commands.states import PowerState, VmState
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations

PROJECTS = ("pa", "pb")
FLAVORS = {"small": (1, 512, 1), "big": (3, 2048, 5)}  # vcpus, ram MiB, disk GiB
HOSTS = {"h1": (2, 4096, 20), "h2": (4, 2048, 10)}  # vcpus (x4 allocation ratio), memory, disk


@dataclass
class Server:
    project: str
    flavor: str
    host: str | None = None  # holds a claim there
    state: str = "building"  # building, active, error, deleting
    holds_resources: bool = True  # cores and RAM in its project's quota (a fault gives them back)


@dataclass
class Model:
    servers: dict[str, Server] = field(default_factory=dict)
    limits: dict[str, dict[str, int]] = field(default_factory=dict)


class DomainMachine(RuleBasedStateMachine):
    """The handlers and the model side by side. Every example works on one log with hosts and
    projects of its own (names suffixed with the example's number); flavors are shared."""

    handlers: Handlers
    examples = 0

    @initialize()
    def setup(self) -> None:
        self.model = Model()
        DomainMachine.examples += 1
        self.n = DomainMachine.examples
        if self.n == 1:
            for name, (vcpus, ram, disk) in FLAVORS.items():
                self.handlers.create_flavor(CreateFlavor(name, name, vcpus=vcpus, ram=ram, disk=disk))
        for name, (vcpus, ram, disk) in HOSTS.items():
            self.handlers.register_host(RegisterHost(self._h(name), vcpus=vcpus, memory_mb=ram, disk_gb=disk))
        for project in PROJECTS:
            self._set_quota(project, {"instances": 4, "cores": 8, "ram": 6144})

    def _h(self, name: str) -> str:
        return f"{name}-{self.n}"

    def _p(self, name: str) -> str:
        return f"{name}-{self.n}"

    # -- helpers --------------------------------------------------------------------------------
    def _head(self) -> int:
        return self.handlers.app.recorder.max_notification_id() or 0

    def _refused(self, call: object) -> DomainError | None:
        """Run ``call``; if the domain refuses it, check that nothing was appended."""
        before = self._head()
        try:
            call()  # type: ignore[operator]
        except DomainError as e:
            assert self._head() == before, f"a refused command appended something: {e}"
            return e
        return None

    def _set_quota(self, project: str, limits: dict[str, int]) -> None:
        Operations(self.handlers.app).set_quota(self._p(project), limits, self._used(project), force=True)
        self.model.limits[project] = {**self.model.limits.get(project, {}), **limits}

    def _used(self, project: str) -> dict[str, int]:
        live = [s for s in self.model.servers.values() if s.project == project]
        return {
            "instances": len(live),
            "cores": sum(FLAVORS[s.flavor][0] for s in live if s.holds_resources),
            "ram": sum(FLAVORS[s.flavor][1] for s in live if s.holds_resources),
        }

    def _placed(self) -> list[str]:
        return [s for s in self._servers("building") if self.model.servers[s].host]

    def _servers(self, *states: str) -> list[str]:
        """In the order they were created (their ids are random: a replay must pick the same one)."""
        return [sid for sid, s in self.model.servers.items() if s.state in states]

    @staticmethod
    def _pick(data: st.DataObject, sids: list[str]) -> str:
        return sids[data.draw(st.integers(0, len(sids) - 1))]

    # -- rules ----------------------------------------------------------------------------------
    @rule(project=st.sampled_from(PROJECTS), flavor=st.sampled_from(sorted(FLAVORS)))
    def create(self, project: str, flavor: str) -> None:
        created: list[str] = []
        refusal = self._refused(
            lambda: created.append(
                self.handlers.create_server(CreateServer("vm", self._p(project), "u", flavor)).id
            )
        )
        used, limits = self._used(project), self.model.limits[project]
        vcpus, ram, _ = FLAVORS[flavor]
        fits = (
            used["instances"] + 1 <= limits["instances"]
            and used["cores"] + vcpus <= limits["cores"]
            and used["ram"] + ram <= limits["ram"]
        )
        if fits:
            assert refusal is None, refusal
            self.model.servers[created[0]] = Server(project, flavor)
        else:
            assert isinstance(refusal, QuotaExceeded), refusal

    @precondition(lambda self: self._servers("building"))
    @rule(data=st.data(), host=st.sampled_from(sorted(HOSTS)))
    def place(self, data: st.DataObject, host: str) -> None:
        sid = self._pick(data, self._servers("building"))
        server = self.model.servers[sid]
        refusal = self._refused(lambda: self.handlers.place_instance(PlaceInstance(sid, self._h(host))))
        if refusal is None:
            assert server.host is None, "placed twice"
            server.host = host
        else:
            assert isinstance(refusal, InsufficientResources) or server.host is not None, refusal

    @precondition(lambda self: self._placed())
    @rule(data=st.data())
    def spawn(self, data: st.DataObject) -> None:
        sid = self._pick(data, self._placed())
        server = self.model.servers[sid]
        self.handlers.start_spawning(StartSpawning(sid, self._h(server.host or "")))
        self.handlers.finish_spawning(FinishSpawning(sid, PowerState.RUNNING))
        server.state = "active"

    @precondition(lambda self: self._servers("building", "active"))
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        sid = self._pick(data, self._servers("building", "active"))
        self.handlers.fail_instance(FailInstance(sid, "test.failed", "failed by the model"))
        server = self.model.servers[sid]
        # a fault releases the claim and the cores and RAM (the instance still counts)
        server.state, server.host, server.holds_resources = "error", None, False

    @precondition(lambda self: self._servers("building", "active", "error"))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        sid = self._pick(data, self._servers("building", "active", "error"))
        server = self.model.servers[sid]
        self.handlers.delete_server(DeleteServer(sid, self._p(server.project)))
        if self.handlers.instance(sid, deleted_too=True).vm_state == VmState.DELETED:
            del self.model.servers[sid]  # never reached a host: gone at once
        else:
            server.state = "deleting"

    @precondition(lambda self: self._servers("deleting"))
    @rule(data=st.data())
    def host_deletes(self, data: st.DataObject) -> None:
        sid = self._pick(data, self._servers("deleting"))
        self.handlers.finish_deletion(FinishDeletion(sid))
        del self.model.servers[sid]

    @rule(project=st.sampled_from(PROJECTS), instances=st.integers(0, 6), cores=st.integers(0, 12))
    def change_quota(self, project: str, instances: int, cores: int) -> None:
        self._set_quota(project, {"instances": instances, "cores": cores})

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def usage_is_the_sum_of_live_servers(self) -> None:
        if not hasattr(self, "model"):
            return
        for project in PROJECTS:
            assert self.handlers.usage(self._p(project)).used() == self._used(project), project

    @invariant()
    def hosts_hold_exactly_their_servers_within_capacity(self) -> None:
        if not hasattr(self, "model"):
            return
        for name in HOSTS:
            host = self.handlers.host(self._h(name))
            expected = {sid for sid, s in self.model.servers.items() if s.host == name}
            assert set(host.claims) == expected, name
            used, capacity = host.used(), host.capacity()
            for resource in ("vcpus", "memory_mb", "disk_gb"):
                assert getattr(used, resource) <= getattr(capacity, resource), (name, resource)

    @invariant()
    def every_server_is_in_a_legal_state(self) -> None:
        if not hasattr(self, "model"):
            return
        states = {"building": VmState.BUILDING, "active": VmState.ACTIVE, "error": VmState.ERROR}
        for sid, server in self.model.servers.items():
            inst = self.handlers.instance(sid)
            if server.state == "deleting":
                assert inst.task_state is not None and inst.vm_state != VmState.DELETED
            else:
                assert inst.vm_state == states[server.state], (sid, inst.vm_state, server)


def test_random_command_sequences_keep_usage_claims_and_states_consistent(
    bridge: NatsBridge, settings: Settings, recorder: object
) -> None:
    handlers = Handlers(Stratus(Factory(bridge=bridge, settings=settings)))

    class Bound(DomainMachine):
        pass

    Bound.handlers = handlers
    Bound.TestCase.settings = settings_for_ci()
    Bound.TestCase().runTest()


def settings_for_ci() -> settings:
    # One log for every example (each example's servers are new; hosts and flavors are re-used):
    # bounded so that the whole run takes seconds, derandomized so that CI runs the same sequences.
    return settings(
        max_examples=30, stateful_step_count=25, deadline=None, database=None, derandomize=True,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
