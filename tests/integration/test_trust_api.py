"""The API checks the history it loads (docs/trust.md): a request on a server whose history holds an
event the trust check refuses is answered as Nova answers a request the server's state forbids
(409 ``conflictingRequest``, ``X-Stratus-Error-Code: api.untrusted_history``), never a 500 and never
acted on; once the operator excludes the event (``stratus trust exclude``), the same request is
accepted. The stack runs on a server with trust on, the API as its own identity."""

from __future__ import annotations

import dataclasses
from uuid import UUID

import pytest

from commands.hosts.register import RegisterHost
from commands.instance import Instance
from commands.servers.scheduling import PlaceInstance
from processes import trust
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from tests.fixtures.api import Stack, assert_fault
from tests.fixtures.commands import make_app
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.trust import Trusted


@pytest.fixture
def signed_log(trusted: Trusted) -> Trusted:
    trust.cut_over(trusted.directory, lambda: 0)
    return trusted


@pytest.fixture
def settings(signed_log: Trusted) -> Settings:
    """The stack's settings: the trusted server, the API's seed and the registry."""
    return signed_log.as_part("api")


@pytest.fixture
def bridge(signed_log: Trusted) -> NatsBridge:
    return signed_log.bridge("api")


def test_a_request_on_a_server_with_a_forged_history_is_a_conflict_until_the_operator_excludes_it(
    stack: Stack, signed_log: Trusted, api_settings: Settings
) -> None:
    operator = signed_log.bridge("admin")

    def part(name: str) -> Handlers:
        s = dataclasses.replace(api_settings, nats_seed_file=trust.seed_file(signed_log.directory, name))
        return Handlers(make_app(operator, s))

    flavor, _ = stack.flavor()
    stack.handlers.register_host(RegisterHost("compute-1", 4, 8192, 100))
    server, _ = stack.server(flavor)
    part("scheduler").place_instance(PlaceInstance(server, "compute-1"))
    forger = part("host:compute-2")
    forged: Instance = forger.app.repository.get(UUID(server))
    forged.mark_deleted()
    forged_at = forger.app.save(forged)[-1].notification.id

    for method, path, body in (
        ("DELETE", f"/v2.1/servers/{server}", None),
        ("POST", f"/v2.1/servers/{server}/action", {"os-stop": None}),
        ("PUT", f"/v2.1/servers/{server}", {"server": {"name": "renamed"}}),
    ):
        r = stack.request(method, path, json=body)
        assert_fault(r, 409, "conflictingRequest", f"refused by the trust check at log position {forged_at}")
        assert r.headers["X-Stratus-Error-Code"] == "api.untrusted_history"
        assert "compute-2" not in r.text  # who forged it is the log's (and the operator's), not the caller's
    r = stack.get(f"/v2.1/servers/{server}", after=forged_at)  # the read model never applied it
    assert r.status_code == 200 and r.json["server"]["status"] == "BUILD", r.text

    admin = dataclasses.replace(api_settings, nats_seed_file=trust.seed_file(signed_log.directory, "admin"))
    trust.exclude(admin, forged_at, "appended with compute-2's stolen key")
    r = stack.request("DELETE", f"/v2.1/servers/{server}")
    assert r.status_code == 204, r.text
