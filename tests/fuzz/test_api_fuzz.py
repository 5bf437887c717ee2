"""Schemathesis drives every operation of ``schemas/openapi.json`` as an admin, a member and a reader,
against a running stack (the API app on real JetStream and PostgreSQL, the projector following the
log): 0 responses of 5xx, 0 responses that break the documented schema.

To go deeper than the 404s of unknown ids, resources are made first (a flavor, an image with data,
a server, a key pair, a server group, a host aggregate, a host with its resource provider) and each
operation is fuzzed both with generated path parameters and with the ids of those resources; then
the stateful phase follows the document's OpenAPI links (a create's answer to the operations on
what it created) with random sequences. The run is derandomized (the same cases on every CI run);
``STRATUS_FUZZ_EXAMPLES`` and ``STRATUS_FUZZ_STEPS`` make a longer campaign by hand, and
``STRATUS_FUZZ_SEED`` a random one. The summary (requests, operations reached beyond 404 per role,
failures) is printed and written to ``$STRATUS_FUZZ_REPORT`` when set (docs/security.md).
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import schemas
from api.openapi import DOCUMENT
from commands.hosts.register import RegisterHost
from commands.servers.scheduling import PlaceInstance
from tests.fixtures.api import ADMIN, P1, Stack

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("STRATUS_FUZZ_EXAMPLES", "6"))
STEPS = int(os.environ.get("STRATUS_FUZZ_STEPS", "12"))
STATEFUL_EXAMPLES = int(os.environ.get("STRATUS_FUZZ_STATEFUL_EXAMPLES", "15"))
SEED = os.environ.get("STRATUS_FUZZ_SEED")  # unset: derandomized, the same cases on every run
# A stream never ends; the fuzzer would wait forever for its body (tests/integration/test_watch.py covers it).
EXCLUDED = {("GET", "/v2.1/stratus/events")}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
_ORDER = {"GET": 0, "HEAD": 0, "PUT": 1, "PATCH": 1, "POST": 1, "DELETE": 2}


def inlined(doc: Any) -> Any:
    """The document with its request schemas (``{"$ref": "api/x.json"}``) inlined: one self-contained
    document, as a client that cannot fetch the files beside it needs."""
    if isinstance(doc, dict):
        ref = doc.get("$ref")
        if isinstance(ref, str) and ref.startswith("api/") and len(doc) == 1:
            loaded = {k: v for k, v in schemas.load(ref).items() if k not in ("$schema", "$id")}
            return inlined(loaded)
        return {k: inlined(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [inlined(v) for v in doc]
    return doc


@dataclass
class Report:
    requests: int = 0
    stateful: int = 0  # of which, steps of the stateful phase
    statuses: Counter[int] = field(default_factory=Counter)
    reached: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    operations: set[str] = field(default_factory=set)
    failures: dict[str, str] = field(default_factory=dict)

    def record(self, role: str, op: str, case: Any, response: Any) -> None:
        self.requests += 1
        self.statuses[response.status_code] += 1
        self.operations.add(op)
        if response.status_code != 404:
            self.reached[role].add(op)
        # A 501 the document names is Nova's own answer for a feature its driver lacks, not an error.
        documented = str(response.status_code) in (case.operation.definition.raw.get("responses") or {})
        checks = CHECKS if response.status_code != 501 or not documented else CHECKS[1:]
        try:
            case.validate_response(response, checks=checks)
        except (AssertionError, BaseExceptionGroup) as e:  # a Failure, or a FailureGroup of them
            key = f"{op} [{response.status_code}]"
            self.failures.setdefault(key, f"{role}: {case.as_curl_command()[:600]} -> {str(e)[:600]}")

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "stateful_steps": self.stateful,
            "statuses": dict(sorted(self.statuses.items())),
            "operations": len(self.operations),
            "reached_beyond_404": len(set().union(*self.reached.values())),
            "reached_beyond_404_per_role": {role: len(ops) for role, ops in sorted(self.reached.items())},
            "only_404": sorted(self.operations - set().union(*self.reached.values())),
            "failures": self.failures,
        }


def seed(stack: Stack) -> dict[str, str]:
    """Resources the fuzzer aims at, by path parameter name."""
    flavor, _ = stack.flavor(id="tiny")
    stack.request("POST", "/v2.1/flavors/tiny/os-extra_specs", ADMIN, json={"extra_specs": {"k": "v"}})
    image = stack.request("POST", "/image/v2/images", ADMIN, json={
        "name": "fuzz", "disk_format": "raw", "container_format": "bare", "visibility": "public"
    }).json["id"]  # fmt: skip
    headers = {**stack.auth(ADMIN), "Content-Type": "application/octet-stream"}
    stack.client.simulate_put(f"/image/v2/images/{image}/file", headers=headers, body=b"x" * 1024)
    host = stack.handlers.register_host(RegisterHost("fuzz-host", vcpus=64, memory_mb=65536, disk_gb=500))
    server, _ = stack.server(flavor, P1, metadata={"k": "v"})
    tagging = {**stack.auth(P1), "OpenStack-API-Version": "compute 2.26"}
    stack.request("PUT", f"/v2.1/servers/{server}/tags/t", tagging)
    stack.handlers.place_instance(PlaceInstance(server, "fuzz-host"))
    stack.request("POST", "/v2.1/os-keypairs", P1, json={"keypair": {"name": "fuzz-key"}})
    group = stack.request("POST", "/v2.1/os-server-groups", P1, json={
        "server_group": {"name": "g", "policies": ["anti-affinity"]}
    }).json["server_group"]["id"]  # fmt: skip
    aggregate = stack.request("POST", "/v2.1/os-aggregates", ADMIN, json={
        "aggregate": {"name": "agg", "availability_zone": "az1"}
    }).json["aggregate"]["id"]  # fmt: skip
    actions = stack.get(f"/v2.1/servers/{server}/os-instance-actions", P1).json["instanceActions"]
    stack.request("POST", "/image/v2/metadefs/namespaces", ADMIN, json={
        "namespace": "fuzz-ns", "visibility": "public", "objects": [{"name": "fuzz-obj"}],
        "properties": {"fuzz-prop": {"type": "string", "title": "p"}}, "tags": [{"name": "fuzz-tag"}],
        "resource_type_associations": [{"name": "OS::Glance::Image"}],
    })  # fmt: skip
    roles = {r["name"]: r["id"] for r in stack.request("GET", "/identity/v3/roles", ADMIN).json["roles"]}
    p1 = stack.project_id("p1")
    # Identity targets of their own: the fuzzer may disable them, change their passwords or remove
    # their grants, and the personas it acts as must keep working.
    target_user = stack.identities.user("fuzz-target", "fuzz-target-pw", {"fuzz-target": ("member",)})
    target_project = stack.project_id("fuzz-target")
    return {
        "server_id": server, "flavor_id": flavor, "image_id": image, "group_id": group,
        "aggregate_id": str(aggregate), "project_id": target_project, "tenant_id": p1,
        "user_id": target_user, "role_id": roles["member"], "hypervisor_id": "fuzz-host",
        "host_name": "fuzz-host",
        "uuid": str(host.id), "consumer": server, "resource_class": "VCPU", "key": "k", "tag": "t",
        "kind": "server", "resource_id": server, "request_id": actions[0]["request_id"] if actions else "",
        "domain_id": "default", "action": "enable",
        "namespace": "fuzz-ns", "object_name": "fuzz-obj", "property_name": "fuzz-prop",
        "tag_name": "fuzz-tag", "resource_type": "OS::Glance::Image",
    }  # fmt: skip


def _latest(path: str) -> dict[str, str]:
    service = "placement" if path.startswith("/placement") else "compute"
    return {"OpenStack-API-Version": f"{service} latest"}


def _known(path: str, ids: dict[str, str]) -> dict[str, str]:
    names = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
    out = {n: ids[n] for n in names if n in ids}
    if "name" in names:
        out["name"] = "fuzz-key" if "keypairs" in path else "CUSTOM_FUZZ"
    return out if len(out) == len(names) else {}


@pytest.mark.timeout(900)  # every operation x 3 roles x 2 microversions: ~4 min on a loaded machine
def test_every_operation_as_admin_member_and_reader_answers_no_5xx_and_keeps_its_schema(
    stack: Stack,
) -> None:
    ids = seed(stack)
    tokens = {
        "reader": stack.identities.persona("fuzz-reader", "p1", "reader"),
        "member": stack.identities.persona("fuzz-member", "p1", "member"),
        "admin": stack.identities.persona("fuzz-admin", "p1", "admin", "member"),
    }
    schema = schemathesis.openapi.from_dict(inlined(json.loads(DOCUMENT.read_text())))
    schema.app = stack.app
    schema.location = "/openapi.json"
    # Reads first, then writes, then deletes, the deepest paths first (a server's tags before it).
    operations = sorted(
        (r.ok() for r in schema.get_all_operations()),  # type: ignore[union-attr]
        key=lambda op: (_ORDER.get(op.method.upper(), 1), -op.path.count("/"), op.path),
    )
    report = Report()
    options = {
        "max_examples": EXAMPLES, "deadline": None, "database": None, "derandomize": SEED is None,
        "suppress_health_check": list(HealthCheck), "phases": [Phase.explicit, Phase.generate],
    }  # fmt: skip
    for op in operations:
        name = f"{op.method.upper()} {op.path}"
        if (op.method.upper(), op.path) in EXCLUDED:
            continue
        known = _known(op.path, ids)
        for role, token in tokens.items():
            call = (lambda r, n: lambda case: report.record(r, n, case, case.call()))(role, name)
            for headers in (token, {**token, **_latest(op.path)}):  # the oldest microversion and the newest
                _fuzz(op.as_strategy(headers=headers), options, call)
                if known:  # the same aimed at the resources made first
                    _fuzz(op.as_strategy(headers=headers, path_parameters=known), options, call)
    _stateful(schema, tokens, report)

    summary = report.summary()
    print(json.dumps(summary, indent=1))
    if os.environ.get("STRATUS_FUZZ_REPORT"):
        with open(os.environ["STRATUS_FUZZ_REPORT"], "w") as f:
            json.dump(summary, f, indent=1)
    assert summary["failures"] == {}, json.dumps(summary["failures"], indent=1)
    assert all(s < 500 or s == 501 for s in report.statuses)  # 501: documented (see record)
    # The fuzzer reached the operations' logic, not only their 404s.
    assert summary["reached_beyond_404"] >= 0.95 * summary["operations"], summary


def _fuzz(strategy: Any, options: dict[str, Any], call: Any) -> None:
    @settings(**options)
    @given(case=strategy)
    def fuzz(case: Any) -> None:
        call(case)

    if SEED is not None:
        fuzz = hypothesis.seed(int(SEED))(fuzz)
    fuzz()


def _stateful(schema: Any, tokens: dict[str, dict[str, str]], report: Report) -> None:
    """Random sequences along the OpenAPI links (create, then act on what was created), as admin and
    as member: every response checked like the others."""
    # One sequence per run, each from a seed of its own: a sequence's steps depend on what the stack
    # answered, so Hypothesis cannot replay or explore around one (it would not draw the same);
    # nothing needs shrinking either (every response is recorded, and the report asserts).
    for role in ("admin", "member"):
        Machine = _machine(schema.as_state_machine(), role, tokens[role], report)
        Machine.TestCase.settings = settings(
            max_examples=1, stateful_step_count=STEPS, deadline=None, database=None,
            suppress_health_check=list(HealthCheck), phases=[Phase.generate],
        )  # fmt: skip
        for run in range(STATEFUL_EXAMPLES):
            hypothesis.seed(int(SEED or 0) * 1000 + run)(Machine.TestCase)().runTest()


def _machine(base: Any, role: str, headers: dict[str, str], report: Report) -> Any:
    class Machine(base):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": headers}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            report.stateful += 1
            report.record(role, f"{case.method.upper()} {case.path}", case, response)

    return Machine
