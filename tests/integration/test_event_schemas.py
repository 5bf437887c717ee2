"""Every event the code emits validates against its published schema in schemas/.

The scenario drives every command through the real JetStream event store, then reads the log back
as CloudEvents envelopes: each envelope must match schemas/envelope.v1.json and its data the schema
of its type and version. A second test makes sure no event class lacks a schema.
"""

from __future__ import annotations

import inspect
import uuid

from eventsourcing.domain import Aggregate, CanMutateAggregate, _created_event_classes

import schemas
from commands import (
    application_credentials,
    census,
    flavor,
    host,
    host_aggregate,
    identity,
    identity_catalog,
    image,
    image_usage,
    instance,
    keypair,
    ledger,
    metadef,
    network,
    placement,
    provider,
    quota,
    registry,
    server_group,
    task,
    usage,
)
from commands.application_credentials import CreateApplicationCredential
from commands.bus import MessageBus
from commands.flavors.create import CreateFlavor
from commands.hosts.aggregates import CreateHostAggregate, UpdateHostAggregate
from commands.hosts.register import RegisterHost
from commands.hosts.services import SetServiceStatus
from commands.identity import role_id
from commands.identity_catalog_handlers import CreateEndpoint, CreateRegion, CreateService
from commands.identity_domains import (
    Assignment,
    CreateDomain,
    CreateGroup,
    CreateRole,
    DeleteDomain,
    UpdateDomain,
    UpdateGroup,
    UpdateRole,
)
from commands.images.create import CreateImage, DeleteImage, RecordImageUpload
from commands.images.tasks import RecordTask
from commands.images.update import (
    AddImageMember,
    RemoveImageMember,
    SetImageActive,
    SetImageMemberStatus,
    UpdateImage,
)
from commands.keypairs.manage import CreateKeyPair, DeleteKeyPair
from commands.metadefs.namespaces import ChangeNamespace, CreateNamespace, DeleteNamespace, UpdateNamespace
from commands.network import FixedNetwork
from commands.servers.actions import (
    FailAction,
    FinishAction,
    LockServer,
    PinZone,
    RebuildServer,
    RequestAction,
    ResetServerState,
    UnlockServer,
    UnshelveServer,
)
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.fields import SetServerMetadata, SetServerTags, UpdateServer
from commands.servers.groups import CreateServerGroup
from commands.servers.moves import FailMigration, MigrateServer, ResizeDecision, ResizeServer
from commands.servers.reconcile import RecordStrayGuests, SyncPowerState
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FailInstance, FinishSpawning, StartSpawning
from commands.states import PowerState
from stratus.context import Actor, CommandContext, acting
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.identity_handlers import (
    CreateProject,
    CreateUser,
    GrantRole,
    IdentityHandlers,
    RevokeRole,
    RevokeToken,
    UpdateProject,
    UpdateUser,
)
from tests.fixtures.facades.lifecycle import LifecycleHandlers, ReconciliationHandlers
from tests.fixtures.facades.migration import MigrationHandlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.facades.placement_handlers import PlacementHandlers
from tests.fixtures.facades.server_fields import ServerFieldHandlers


def _event_classes() -> list[tuple[str, str]]:
    found = []
    modules = (
        flavor,
        host,
        instance,
        usage,
        host_aggregate,
        quota,
        registry,
        server_group,
        image,
        image_usage,
        keypair,
        ledger,
        metadef,
        network,
        placement,
        provider,
        census,
        identity,
        task,
        identity_catalog,
        application_credentials,
    )
    for module in modules:
        for _, agg in inspect.getmembers(module, inspect.isclass):
            if not issubclass(agg, Aggregate) or agg is Aggregate or agg.__module__ != module.__name__:
                continue
            members = [
                m for m in vars(agg).values() if inspect.isclass(m) and issubclass(m, CanMutateAggregate)
            ]
            # the concrete events only: not the bases others derive from (Event), nor the library's
            # default Created when __init__ records another creation event (Requested, Registered)
            created = _created_event_classes[agg]
            concrete = [
                m
                for m in members
                if not any(o is not m and issubclass(o, m) for o in members)
                and (m.__name__ != "Created" or m in created)
            ]
            found += [(agg.__name__.lower(), m.__name__.lower()) for m in concrete]
    return sorted(found)


def test_every_emitted_event_validates_against_its_schema(handlers: Handlers) -> None:
    ctx = CommandContext(actor=Actor("u1", "p1", ("member",)))
    with acting(ctx):
        handlers.create_flavor(CreateFlavor("1", "m1.tiny", 1, 512, 1, description="tiny"))
        handlers.register_host(RegisterHost("c1", 2, 2048, 20))
        ok = handlers.create_server(
            CreateServer("vm", "p1", "u1", "1", metadata={"k": "v"}, idempotency_key="abc")
        )
        handlers.place_instance(PlaceInstance(ok.id, "c1"))
        handlers.start_spawning(StartSpawning(ok.id, "c1"))
        handlers.finish_spawning(FinishSpawning(ok.id, PowerState.RUNNING))
        lifecycle = LifecycleHandlers(handlers)
        lifecycle.lock(LockServer(ok.id, "p1", reason="maintenance"))
        lifecycle.unlock(UnlockServer(ok.id, "p1"))
        lifecycle.request_action(RequestAction(ok.id, "p1", "stop"))
        lifecycle.finish_action(FinishAction(ok.id, "stop", PowerState.SHUTDOWN))
        lifecycle.request_action(RequestAction(ok.id, "p1", "start"))
        lifecycle.fail_action(FailAction(ok.id, "start", "compute.action_failed", "no", "d", 4))
        reconciliation = ReconciliationHandlers(handlers)
        reconciliation.sync_power_state(SyncPowerState(ok.id, PowerState.RUNNING))
        stray = (f"instance-{ok.id}", PowerState.RUNNING, "left alone")
        reconciliation.record_strays(RecordStrayGuests("c1", {ok.id: stray}))
        reconciliation.record_strays(RecordStrayGuests("c1", {}))
        handlers.delete_server(DeleteServer(ok.id, "p1"))
        handlers.finish_deletion(FinishDeletion(ok.id))
        bad = handlers.create_server(CreateServer("vm2", "p1", "u1", "1"))
        handlers.place_instance(PlaceInstance(bad.id, "c1"))
        handlers.fail_instance(FailInstance(bad.id, "compute.spawn_failed", "libvirt said no", "trace"))
        _operator_scenario(handlers)
        _catalog_scenario(handlers)
        _metadef_scenario(handlers)
        _placement_scenario(handlers)
        _move_scenario(handlers)
        _identity_scenario(handlers)
        handlers.app.save(_deleted_flavor(handlers))

    envelopes = handlers.app.recorder.read_envelopes(1, 1000)  # type: ignore[attr-defined]
    seen = set()
    for envelope in envelopes:
        doc = envelope.to_dict()
        errors = [e.message for e in schemas.validator("envelope.v1.json").iter_errors(doc)]
        assert errors == [], (doc["type"], errors)
        _, kind, type_ = doc["type"].split(".")
        name = schemas.event_schema_name(kind, type_, doc["schemaversion"])
        errors = [f"{list(e.path)}: {e.message}" for e in schemas.validator(name).iter_errors(doc["data"])]
        assert errors == [], (name, errors)
        assert doc["actoruser"] == "u1" and doc["actorproject"] == "p1"
        seen.add((kind, type_))
    # the scenario really did emit every event type there is
    assert sorted(seen) == _event_classes()


def _identity_scenario(handlers: Handlers) -> None:
    """Roles, projects, users, grants, a password change (no hash in the event), a revoked token."""
    ident = IdentityHandlers(handlers.app)
    seeded = ident.bootstrap()
    project = ident.create_project(CreateProject("web", description="the web team")).id
    ident.update_project(UpdateProject(project, enabled=False))
    ident.update_project(UpdateProject(project, name="web2"))
    user = ident.create_user(CreateUser("alice", default_project_id=project, email="a@example.org")).id
    ident.update_user(UpdateUser(user, enabled=False))
    ident.update_user(UpdateUser(user, name="alice2", extra={"project_id": project}))
    ident.update_user(UpdateUser(user, name="alice"))
    ident.record_password_set(user)
    ident.grant_role(GrantRole(project, user, role_id("member")))
    ident.revoke_role(RevokeRole(project, user, role_id("member")))
    expires = "2026-01-01T01:00:00+00:00"
    ident.revoke_token(RevokeToken("ab" * 16, seeded.user_id, seeded.project_id, expires))
    ident.delete_user(user)
    ident.delete_project(project)
    ident.create_user(CreateUser("alice"))  # the deleted user's name, given again
    _directory_scenario(ident)


def _directory_scenario(ident: IdentityHandlers) -> None:
    """Domains, groups, roles, grants to groups and on domains, the catalog, application credentials."""
    domain = ident.create_domain(CreateDomain("eng", "engineering")).id
    ident.update_domain(UpdateDomain(domain, name="eng2"))
    project = ident.create_project(CreateProject("api", domain)).id
    user = ident.create_user(CreateUser("bob", domain)).id
    group = ident.create_group(CreateGroup("ops", domain)).id
    ident.update_group(UpdateGroup(group, description="on call"))
    ident.add_group_user(group, user)
    role = ident.create_role(CreateRole("auditor")).id
    ident.update_role(UpdateRole(role, name="inspector"))
    ident.imply_role(role, role_id("reader"))
    ident.stop_implying_role(role, role_id("reader"))
    for scope, scope_id in (("project", project), ("domain", domain), ("system", "all")):
        for actor, actor_id in (("user", user), ("group", group)):
            grant = Assignment(scope, scope_id, actor, actor_id, role)
            ident.assign(grant)
            ident.unassign(grant)
    ident.assign(Assignment("project", project, "user", user, role))
    rules = ({"id": "r1", "service": "compute", "path": "/v2.1/servers", "method": "GET"},)
    credential = CreateApplicationCredential(
        user, project, "ci", (role,), expires_at="2030-01-01T00:00:00+00:00", access_rules=rules
    )
    ident.create_application_credential(credential, "cd" * 16)
    ident.delete_application_credential("cd" * 16)
    ident.delete_access_rule(user, "r1")
    ident.delete_role(role)
    ident.remove_group_user(group, user)
    ident.delete_group(group)
    ident.create_group(CreateGroup("ops2", domain))
    ident.update_domain(UpdateDomain(domain, enabled=False))
    ident.delete_domain(DeleteDomain(domain, (project,), (user,), ()))
    ident.create_region(CreateRegion("west", "w"))
    ident.update_region("west", "west coast", None)
    service = ident.create_service(CreateService("volumev3", "cinder")).id
    ident.update_service(service, {"enabled": False})
    endpoint = ident.create_endpoint(CreateEndpoint(service, "public", "http://vol/v3", "west")).id
    ident.update_endpoint(endpoint, {"url": "http://vol:8776/v3"})
    ident.delete_endpoint(endpoint)
    ident.delete_service(service)
    ident.delete_region("west")


def _operator_scenario(handlers: Handlers) -> None:
    """Flavor extras, services, aggregates and zones, quotas, server groups (the Operations facade)."""
    ops = Operations(handlers.app)
    ops.create_flavor(CreateFlavor("2", "m1.private", 1, 256, 1, is_public=False))
    ops.set_flavor_extra_specs("2", {"hw:cpu_policy": "dedicated"})
    ops.delete_flavor_extra_spec("2", "hw:cpu_policy")
    ops.update_flavor_description("2", "for pinned guests")
    ops.add_flavor_access("2", "p1")
    ops.remove_flavor_access("2", "p1")
    ops.delete_flavor("2")
    agg = ops.create_host_aggregate(CreateHostAggregate("rack1", "az1")).id
    ops.add_host_to_aggregate(agg, "c1")
    ops.update_host_aggregate(UpdateHostAggregate(agg, name="rack-1"))
    ops.set_host_aggregate_metadata(agg, {"ssd": "yes", "availability_zone": None})
    ops.remove_host_from_aggregate(agg, "c1")
    ops.delete_host_aggregate(agg)
    ops.set_quota("p1", {"instances": 20, "server_group_members": -1}, {})
    ops.reset_quota("p1")
    ops.set_quota_class("default", {"instances": 12})
    group = ops.create_server_group(CreateServerGroup("web", "p1", "u1", "anti-affinity")).id
    member = handlers.create_server(CreateServer("vm3", "p1", "u1", "1", group=group))
    handlers.place_instance(PlaceInstance(member.id, "c1"))
    handlers.delete_server(DeleteServer(member.id, "p1"))
    handlers.finish_deletion(FinishDeletion(member.id))
    ops.delete_server_group(group, "p1")
    ops.set_service_status(SetServiceStatus("c1", "nova-compute", disabled=True, disabled_reason="repair"))
    ops.set_service_status(SetServiceStatus("c1", "nova-compute", disabled=False, forced_down=True))


def _catalog_scenario(handlers: Handlers) -> None:
    """Images, key pairs, fixed IPs and a server's own fields (commands.images, keypairs, server_fields)."""
    handlers.network = FixedNetwork("private", "10.0.0.0/24")
    catalog = handlers.bus
    kernel = catalog.handle(CreateImage("p1", "vmlinuz", disk_format="aki", container_format="aki")).id
    catalog.handle(RecordImageUpload(kernel, "p1", 6, "a" * 32, "sha256", "b" * 64))
    root = catalog.handle(
        CreateImage("p1", "os", disk_format="raw", container_format="bare", properties={"kernel_id": kernel})
    ).id
    catalog.handle(RecordImageUpload(root, "p1", 4, "c" * 32, "sha256", "d" * 64))
    catalog.handle(CreateKeyPair("u1", "k"))
    catalog.handle(DeleteKeyPair("u1", "k"))
    catalog.handle(CreateKeyPair("u1", "k"))
    server = handlers.create_server(
        CreateServer(
            "vm4", "p1", "u1", "1", image_ref=root, key_name="k", description="d", tags=("a",),
            user_data={"id": "e" * 64, "size": 10}, reservation_id="r-12345678", requested_host="c1",
        )
    ).id  # fmt: skip
    fields = ServerFieldHandlers(handlers)
    fields.update_server(UpdateServer(server, "p1", name="vm4b", description="e"))
    fields.set_metadata(SetServerMetadata(server, "p1", {"x": "1"}, replace=True))
    fields.set_tags(SetServerTags(server, "p1", ("b",)))
    handlers.place_instance(PlaceInstance(server, "c1"))
    handlers.start_spawning(StartSpawning(server, "c1"))
    handlers.finish_spawning(FinishSpawning(server, PowerState.RUNNING))
    lifecycle = LifecycleHandlers(handlers)
    lifecycle.rebuild(RebuildServer(server, "p1", root))
    lifecycle.finish_action(FinishAction(server, "rebuild", PowerState.RUNNING))
    new_data = ({"id": "f" * 64, "size": 3},)
    again = RebuildServer(server, "p1", root, key_name="", user_data=new_data, user_id="u1")
    lifecycle.rebuild(again)
    lifecycle.reset_state(ResetServerState(server, "active"))  # an admin frees it from the rebuild
    lifecycle.request_action(RequestAction(server, "p1", "shelve"))
    lifecycle.finish_offload(FinishAction(server, "shelve", PowerState.SHUTDOWN))
    lifecycle.unshelve(UnshelveServer(server, "p1", zone=(None,), host="c1"))
    handlers.fail_instance(FailInstance(server, "compute.no_valid_host", "No valid host was found. ", "none"))
    lifecycle.unshelve(UnshelveServer(server, "p1"))
    handlers.place_instance(PlaceInstance(server, "c1"))
    handlers.start_spawning(StartSpawning(server, "c1"))
    handlers.finish_spawning(FinishSpawning(server, PowerState.RUNNING))
    lifecycle.pin_zone(PinZone(server, "p1", "nova"))
    handlers.delete_server(DeleteServer(server, "p1"))
    handlers.finish_deletion(FinishDeletion(server))
    catalog.handle(DeleteImage(root, "p1"))
    _image_updates_scenario(catalog, kernel)


def _image_updates_scenario(catalog: MessageBus, image_id: str) -> None:
    """A JSON patch, (de)activation and sharing (commands.images.update)."""
    fields = {"name": "k2", "tags": ["t"], "os_hidden": True, "owner": "p1", "protected": False}
    catalog.handle(UpdateImage(image_id, "p1", fields, {"os_distro": "x"}, ()))
    catalog.handle(UpdateImage(image_id, "p1", {}, {}, ("os_distro",)))
    catalog.handle(SetImageActive(image_id, "p1", active=False))
    catalog.handle(SetImageActive(image_id, None, active=True))
    catalog.handle(AddImageMember(image_id, "p1", "p2"))
    catalog.handle(SetImageMemberStatus(image_id, "p2", "p2", "accepted"))
    catalog.handle(RemoveImageMember(image_id, "p1", "p2"))
    props = {"image_properties": {"name": "x"}, "import_from": "http://127.0.0.1/x"}
    catalog.handle(RecordTask("import", "p1", "u1", "req-1", props))


def _metadef_scenario(handlers: Handlers) -> None:
    """A metadata definitions namespace and everything defined in it (commands.metadef)."""
    m = handlers.bus
    prop = {"type": "string", "title": "T", "enum": ["a"]}
    fields = {"namespace": "ns", "visibility": "public", "protected": False, "owner": "p1"}
    objects = [{"name": "o", "description": None, "required": [], "properties": {"p": prop}}]
    assoc = [{"name": "OS::Glance::Image", "prefix": "x_", "properties_target": None}]
    m.handle(CreateNamespace(fields, objects, {"p": prop}, ["t"], assoc))
    changes = (
        lambda n: n.add_object("o2", "d", ["p"], {"p": prop}),
        lambda n: n.update_object("o2", "o3", None, [], {}),
        lambda n: n.remove_object("o3"),
        lambda n: n.add_property("q", prop),
        lambda n: n.update_property("q", "r", prop),
        lambda n: n.remove_property("r"),
        lambda n: n.add_tags(["u", "v"], replacing=True),
        lambda n: n.rename_tag("u", "w"),
        lambda n: n.remove_tag("w"),
        lambda n: n.clear("objects"),
        lambda n: n.associate("OS::Nova::Flavor", None, None),
        lambda n: n.dissociate("OS::Nova::Flavor"),
    )
    for change in changes:
        m.handle(ChangeNamespace("ns", change))
    m.handle(UpdateNamespace("ns", {**fields, "namespace": "ns2", "description": "d"}))
    m.handle(DeleteNamespace("ns2"))


def _placement_scenario(handlers: Handlers) -> None:
    """Inventories, traits and aggregates of a provider, and a consumer's allocations."""
    p = PlacementHandlers(handlers.app)
    rp = str(handlers.host("c1").id)
    p.create_resource_class("CUSTOM_GPU")
    p.create_trait("CUSTOM_FAST")
    p.set_inventories(rp, None, {**handlers.host("c1").inventories, "CUSTOM_GPU": {"total": 1}})
    p.set_traits(rp, None, ["CUSTOM_FAST"])
    p.set_aggregates(rp, None, ["5a6ec1d4-0f05-4a49-8a0d-1ab4e3c5f6a7"])
    consumer = "0d9b5c43-9b39-4cbb-9f3a-64e6f38f3a11"
    gpu = {rp: {"CUSTOM_GPU": 1}}
    p.put_allocations(consumer, gpu, consumer_generation=None, project_id="p1", user_id="u1")
    p.delete_allocations(consumer)
    p.create_resource_class("CUSTOM_FPGA_X")
    p.delete_resource_class("CUSTOM_FPGA_X", lambda _rc: False)
    p.create_trait("CUSTOM_RACK_1")
    p.delete_trait("CUSTOM_RACK_1", lambda _t: False)
    # a provider that is not a compute host: created under the host, renamed, given the same facts,
    # deleted
    pool = uuid.UUID("3f0c4c5e-8d0a-4f9e-9a55-1b2c3d4e5f60")
    p.create_provider(pool, "pool", rp)
    p.update_provider(str(pool), "pool-2", None, reparenting=True)
    p.set_inventories(str(pool), None, {"DISK_GB": {"total": 100}})
    p.set_traits(str(pool), None, ["CUSTOM_FAST"])
    p.set_aggregates(str(pool), None, ["5a6ec1d4-0f05-4a49-8a0d-1ab4e3c5f6a7"])
    p.put_allocations(consumer, {str(pool): {"DISK_GB": 10}}, consumer_generation=None, project_id="p1",
                      user_id="u1")  # fmt: skip
    p.delete_allocations(consumer)
    p.delete_provider(str(pool), lambda _u: False)
    # a project's usage closes its books after EPOCH_EVENTS events and carries them forward
    Operations(handlers.app).set_quota("p-epoch", {"instances": -1, "cores": -1}, {})
    handlers.create_server(CreateServer("many", "p-epoch", "u1", "1", count=usage.EPOCH_EVENTS - 1))
    handlers.create_server(CreateServer("one-more", "p-epoch", "u1", "1"))
    assert handlers.usage("p-epoch").epoch == 1


def _move_scenario(handlers: Handlers) -> None:
    """A resize confirmed, one reverted, and one that found no host (tests.fixtures.facades.migration)."""
    handlers.create_flavor(CreateFlavor("mv", "m1.mover", 1, 1024, 1))
    handlers.register_host(RegisterHost("c2", 2, 4096, 20))
    moves = MigrationHandlers(handlers)
    server = handlers.create_server(CreateServer("mover", "p1", "u1", "1")).id
    handlers.place_instance(PlaceInstance(server, "c1"))
    handlers.start_spawning(StartSpawning(server, "c1"))
    handlers.finish_spawning(FinishSpawning(server, PowerState.RUNNING))
    for decision in (moves.confirm, moves.revert):
        moves.resize(ResizeServer(server, "p1", "mv" if decision == moves.confirm else "1"))
        moves.place(server, "c2" if decision == moves.confirm else "c1")
        moves.left_source(server)
        moves.finished(server, PowerState.RUNNING)
        decision(ResizeDecision(server, "p1"))
    moves.left_dest(server)
    moves.reverted(server, PowerState.RUNNING)
    moves.migrate(MigrateServer(server))
    moves.fail(FailMigration(server, "compute.no_valid_host", "No valid host was found. ", "none"))


def _deleted_flavor(handlers: Handlers) -> flavor.Flavor:
    f = handlers.flavor("1")
    f.delete()
    return f


def test_schemas_reject_what_they_should(handlers: Handlers) -> None:
    """The schemas are not vacuous: a wrong type, an unknown field and a missing field all fail."""
    v = schemas.validator(schemas.event_schema_name("instance", "spawned"))
    good = {"timestamp": "2026-01-01T00:00:00Z", "power_state": 1}
    assert v.is_valid(good)
    assert not v.is_valid({**good, "power_state": "running"})
    assert not v.is_valid({**good, "extra": 1})
    assert not v.is_valid({"timestamp": "2026-01-01T00:00:00Z"})
    assert not v.is_valid({**good, "timestamp": "yesterday"})


def test_every_event_class_has_a_schema() -> None:
    classes = _event_classes()
    assert len(classes) >= 12
    names = set(schemas.event_schema_names())
    missing = [f"{k}.{t}" for k, t in classes if schemas.event_schema_name(k, t) not in names]
    assert missing == []
