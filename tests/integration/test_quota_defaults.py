"""Quota limits as every create reads them: a process keeps the default quota class and each project's
quota by the version the log has, and a change made in another process is seen by its next create
(real JetStream: the heads are read ahead with the create's other reads)."""

from __future__ import annotations

import pytest

from commands.app import Stratus
from commands.errors import QuotaExceeded
from commands.servers.create import CreateServer
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations

pytestmark = pytest.mark.flavors(M1_SMALL)


def test_a_changed_default_or_project_quota_is_seen_by_the_next_create_of_another_process(
    handlers: Handlers, bridge: NatsBridge, settings: Settings
) -> None:
    admin = Operations(Stratus(Factory(bridge=bridge, settings=settings)))  # another API process

    def create(name: str) -> str:
        return handlers.create_server(CreateServer(name, "p1", "u1", "small")).id

    create("first")  # Nova's defaults: 10 instances; nothing set on the log yet
    admin.set_quota_class("default", {"instances": 1})
    with pytest.raises(QuotaExceeded):
        create("second")
    admin.set_quota_class("default", {"instances": 3})
    create("second")
    admin.set_quota("p1", {"instances": 2}, {})  # the project's own limit wins over the default
    with pytest.raises(QuotaExceeded):
        create("third")
    admin.set_quota_class("default", {"instances": 1})
    admin.set_quota("p1", {"instances": 5}, {})
    create("third")
    assert handlers.uow.limits("p2")["instances"] == 1  # another project: the default class's
