"""Keystone's and Placement's use cases through the message bus on the in-memory log: each command
decided and appended as in production (``commands.keystone``, ``commands.providers``), with no
NATS and no PostgreSQL."""

from __future__ import annotations

import dataclasses
import inspect
from itertools import count
from uuid import UUID

import pytest

from commands import keystone, providers
from commands.app import Stratus
from commands.bus import HANDLERS, MessageBus, bootstrap
from commands.errors import AlreadyExists, Forbidden, InvalidInput, NotFound
from commands.identity import Project, User, bootstrap_id, role_id
from commands.keystone import loaders
from commands.keystone.assignments import Assignment, AssignRole, GrantRole, RevokeRole
from commands.keystone.bootstrap import BootstrapIdentity
from commands.keystone.domains import CreateDomain, DeleteDomain, UpdateDomain
from commands.keystone.groups import CreateGroup
from commands.keystone.projects import CreateProject, DeleteProject, UpdateProject
from commands.keystone.tokens import RevokeToken
from commands.keystone.users import CreateUser, RecordPasswordSet
from commands.providers.custom import CreateResourceClass, CreateTrait
from commands.providers.inventories import SetInventories, SetTraits
from commands.providers.manage import CreateProvider
from stratus.eventstore.memory import InMemoryFactory, InMemoryRecorder


@pytest.fixture
def log() -> InMemoryRecorder:
    return InMemoryRecorder()


@pytest.fixture
def bus(log: InMemoryRecorder) -> MessageBus:
    ids = count(1)
    return bootstrap(Stratus(InMemoryFactory(recorder=log)), new_identity_id=lambda: f"{next(ids):032x}")


def project(bus: MessageBus, project_id: str) -> Project:
    return loaders.project(bus.uow, project_id)


def user(bus: MessageBus, user_id: str) -> User:
    return loaders.user(bus.uow, user_id)


def test_every_command_of_keystone_and_placement_has_a_handler() -> None:
    packages = [keystone, providers]
    commands: set[type] = set()
    for package in packages:
        for module in package.__dict__.values():
            if inspect.ismodule(module) and module.__name__.startswith(package.__name__ + "."):
                commands |= {
                    cls
                    for cls in vars(module).values()
                    if inspect.isclass(cls)
                    and dataclasses.is_dataclass(cls)
                    and cls.__module__ == module.__name__
                    and cls.__name__[0].isupper()
                    and cls.__name__ not in {"Assignment", "Bootstrapped", "ConsumerChange"}
                }
    assert commands, "no command found"
    assert sorted(c.__name__ for c in commands - HANDLERS.keys()) == []


def test_the_bootstrap_seeds_once(bus: MessageBus, log: InMemoryRecorder) -> None:
    first = bus.handle(BootstrapIdentity())
    head = log.max_notification_id()
    again = bus.handle(BootstrapIdentity())
    assert (again.project_id, again.user_id) == (first.project_id, first.user_id)
    assert first.project_id == bootstrap_id("project", "admin")
    assert log.max_notification_id() == head  # nothing appended the second time
    assert project(bus, first.project_id).holds(first.user_id, role_id("admin"))


def test_a_project_name_is_unique_in_its_domain_until_the_project_is_deleted(bus: MessageBus) -> None:
    bus.handle(BootstrapIdentity())
    web = bus.handle(CreateProject("web")).id
    assert web == f"{1:032x}"  # the bus's identity id generator
    with pytest.raises(AlreadyExists, match="project - web"):
        bus.handle(CreateProject("web"))
    bus.handle(UpdateProject(web, name="web2"))
    assert bus.handle(CreateProject("web")).id != web  # the old name was released by the rename
    bus.handle(DeleteProject(web))
    with pytest.raises(NotFound, match=f"Could not find project: {web}"):
        project(bus, web)
    assert bus.handle(CreateProject("web2")).id  # and the deleted project's name is free again


def test_a_grant_needs_the_user_and_the_role(bus: MessageBus) -> None:
    bus.handle(BootstrapIdentity())
    pid = bus.handle(CreateProject("web")).id
    uid = bus.handle(CreateUser("alice", default_project_id=pid)).id
    with pytest.raises(NotFound, match="Could not find role"):
        bus.handle(GrantRole(pid, uid, "ff" * 16))
    bus.handle(GrantRole(pid, uid, role_id("member")))
    assert project(bus, pid).holds(uid, role_id("member"))
    bus.handle(RevokeRole(pid, uid, role_id("member")))
    assert not project(bus, pid).holds(uid, role_id("member"))
    with pytest.raises(NotFound, match="Could not find role assignment"):
        bus.handle(RevokeRole(pid, uid, role_id("member")))


def test_a_domain_takes_its_members_with_it(bus: MessageBus) -> None:
    bus.handle(BootstrapIdentity())
    eng = bus.handle(CreateDomain("eng")).id
    pid = bus.handle(CreateProject("api", eng)).id
    uid = bus.handle(CreateUser("bob", eng)).id
    gid = bus.handle(CreateGroup("ops", eng)).id
    bus.handle(AssignRole(Assignment("domain", eng, "group", gid, role_id("reader"))))
    with pytest.raises(Forbidden, match="disable it first"):
        bus.handle(DeleteDomain(eng, (pid,), (uid,), (gid,)))
    bus.handle(UpdateDomain(eng, enabled=False))
    bus.handle(DeleteDomain(eng, (pid,), (uid,), (gid,)))
    for load, gone in ((project, pid), (user, uid)):
        with pytest.raises(NotFound):
            load(bus, gone)
    assert bus.handle(CreateDomain("eng")).id != eng  # its name is free again


def test_a_password_set_and_a_revoked_token_are_recorded(bus: MessageBus, log: InMemoryRecorder) -> None:
    done = bus.handle(BootstrapIdentity())
    assert bus.handle(RecordPasswordSet(done.user_id)).position == log.max_notification_id()
    token = RevokeToken("ab" * 16, done.user_id, done.project_id, "2030-01-01T00:00:00+00:00")
    first = bus.handle(token)
    assert bus.handle(token).position == first.position  # revoking again appends nothing


def test_placement_knows_only_the_custom_names_created(bus: MessageBus) -> None:
    rp = UUID("3f0c4c5e-8d0a-4f9e-9a55-1b2c3d4e5f60")
    bus.handle(CreateProvider(rp, "pool"))
    with pytest.raises(InvalidInput, match="No such trait"):
        bus.handle(SetTraits(str(rp), None, ["CUSTOM_FAST"]))
    assert bus.handle(CreateTrait("CUSTOM_FAST")) is True
    assert bus.handle(CreateTrait("CUSTOM_FAST")) is False
    provider, _ = bus.handle(SetTraits(str(rp), None, ["CUSTOM_FAST"]))
    assert list(provider.traits) == ["CUSTOM_FAST"]
    with pytest.raises(InvalidInput, match="Unknown resource class"):
        bus.handle(SetInventories(str(rp), None, {"CUSTOM_GPU": {"total": 1}}))
    bus.handle(CreateResourceClass("CUSTOM_GPU"))
    provider, _ = bus.handle(SetInventories(str(rp), provider.generation, {"CUSTOM_GPU": {"total": 1}}))
    assert "CUSTOM_GPU" in provider.inventories
