"""The identities of a Stratus deployment and what each may do on NATS and on the log.

One table (``appends`` and ``permissions`` below, docs/trust.md) says, per role, on which subjects
of the log it may append and which other NATS subjects it may use. From it come both the nats-server's
``authorization`` block (``nats.conf`` beside the registry: the server enforces it on every
publish) and the rule the projector and ``stratus audit verify`` hold each signed event to (the
registry's ``appends``). ``stratus run`` calls ``prepare`` before it starts the server: keys are
generated once into ``<data_dir>/trust`` and kept across runs; ``rotate`` gives one identity a
new key (docs/trust.md, "Rotating a key").

Roles:

- ``admin``: the operator (seeding, ``audit import``, the quarantine tool): anything;
- ``api`` (and the console proxies): appends any event (it runs every user-facing command), asks
  hosts (console RPC) and relays console sessions,
  manages streams but cannot delete or purge them;
- ``scheduler``: claims on any host, and the instance, group, usage and network events of a placement;
- ``host``: its own host's and guest census's events (a migration's return on the other host
  too), the events of the servers it runs (but the requests and placements: ``HOST_REFUSES``); its
  own heartbeat, its own RPCs and console sessions only;
- ``projector``, ``notifier``: follow the log and append nothing to it;
- ``auditor``, ``integrator``: read only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from commands.census import census_id
from commands.host import host_aggregate_id
from stratus.config import Settings
from stratus.consolerelay import SUBJECT_PREFIX as CONSOLES
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore.subjects import encode_token
from stratus.hostrpc import SUBJECT_PREFIX as HOST_RPC
from stratus.liveness import bucket_for
from stratus.trust import natsconf
from stratus.trust.natsconf import Permissions
from stratus.trust.registry import Identity, Registry, inbox_prefix, new_key, seed_path

REGISTRY = "registry.json"
NATS_CONF = "nats.conf"

# Aggregate kinds (subject tokens) a host appends for the servers it runs: the instance, the
# project's usage, the addresses it gives back, the server group it leaves. (Not Placement's
# consumers: those are the API's and the scheduler's; a host never appends one.)
HOST_KINDS = (
    "instance",
    "projectusage",
    "network",
    "servergroup",
    "groupmembership",
    "imageusage",
)
# Events a host appends on *another* host during a migration (the claim returned to the source).
MIGRATION_TYPES = ("instancereleased", "claimtakenback", "migrationreleased", "claimhandedtomigration")
SCHEDULER_KINDS = ("host", *HOST_KINDS, "consumer")
# Instance events a host never appends, though it appends its servers' others: the requests and
# decisions other parts act on (the API's requests, the scheduler's placements). A host's key on one
# of them is refused by NATS, the projector, ``audit verify`` and the workers (a forged
# ``Scheduled`` would have a hypervisor start a guest).
HOST_REFUSES = tuple(
    f"instance.*.{t}"
    for t in (
        "requested",
        "scheduled",
        "migrationrequested",
        "migrationscheduled",
        "unshelverequested",
        "actionrequested",
        "deletionrequested",
        "revertrequested",
    )
)

# Reading: JetStream's read API (stream info, direct gets, consumers and their acks), replies.
_READ_API = (
    "$JS.API.INFO",
    "$JS.API.STREAM.INFO.>",
    "$JS.API.STREAM.NAMES",
    "$JS.API.STREAM.LIST",
    "$JS.API.DIRECT.GET.>",
    "$JS.API.STREAM.MSG.GET.>",
    "$JS.API.CONSUMER.>",
    "$JS.ACK.>",
    "$JS.FC.>",
)
_DESTRUCTIVE = (
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.API.STREAM.MSG.DELETE.>",
    "$JS.API.ACCOUNT.PURGE.>",
)


@dataclass(frozen=True)
class Spec:
    """An identity to have: its name, role and the hosts it speaks for."""

    name: str
    role: str
    hosts: tuple[str, ...] = ()


def specs(settings: Settings, *, hosts: Sequence[str] = (), simulated: Sequence[str] = ()) -> list[Spec]:
    """The identities of a deployment: the control plane's, one per compute host in ``hosts``, one
    for the simulator's ``simulated`` hosts (one process), an auditor's and an integrator's."""
    out = [
        Spec(r, r) for r in ("admin", "api", "projector", "scheduler", "notifier", "auditor", "integrator")
    ]
    out += [Spec(f"host:{h}", "host", (h,)) for h in hosts]
    if simulated:
        out.append(Spec("simulator", "host", tuple(simulated)))
    return out


def appends(role: str, hosts: Sequence[str] = ()) -> tuple[str, ...]:
    """The log subjects (relative to the prefix) ``role`` may append on."""
    if role in ("admin", "api"):
        return (">",)
    if role == "scheduler":
        return tuple(f"{k}.>" for k in SCHEDULER_KINDS)
    if role == "host":
        own: list[str] = []
        for h in hosts:
            own += [
                f"host.{encode_token(str(host_aggregate_id(h)))}.>",
                f"guestcensus.{encode_token(str(census_id(h)))}.>",
            ]
        return (*own, *(f"host.*.{t}" for t in MIGRATION_TYPES), *(f"{k}.>" for k in HOST_KINDS))
    return ()


def refuses(role: str) -> tuple[str, ...]:
    """The log subjects among its ``appends`` that ``role`` may not append all the same."""
    return HOST_REFUSES if role == "host" else ()


def permissions(identity: Identity, settings: Settings) -> Permissions:
    """What ``identity`` may publish and subscribe to on the deployment ``settings`` names."""
    stream, prefix = settings.stream, settings.subject_prefix
    bucket = bucket_for(stream)
    role = identity.role
    log = tuple(f"{prefix}.{p}" for p in identity.appends)
    wake = f"_STRATUS.WAKE.{stream}"
    writing = (*log, wake, f"_STRATUS.SNAPSHOT.{stream}.>") if log else ()
    quarantine = f"{stream}_QUARANTINE.>"
    # replies to its own requests only: under its own inbox prefix (NatsBridge connects with it)
    subscribe = (f"{inbox_prefix(identity.public_key)}.>", "_STRATUS.WAKE.>")
    if role == "admin":
        return Permissions(publish=(">",), subscribe=(">",), allow_responses=True)
    if role in ("api", "scheduler", "projector", "notifier"):
        extra: tuple[str, ...] = ()
        if role == "api":  # the API and the console proxies: questions to hosts, console sessions
            extra = (f"{HOST_RPC}.>", f"{CONSOLES}.>")
        elif role == "scheduler":
            extra = (f"$KV.{bucket}.>",)
        elif role == "notifier":
            extra = ("versioned_notifications.>",)
        return Permissions(
            publish=(*writing, quarantine, "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", *extra),
            publish_deny=_DESTRUCTIVE,
            subscribe=(*subscribe, *((f"{CONSOLES}.>",) if role == "api" else ())),
        )
    if role == "host":
        names = tuple(encode_token(h) for h in identity.hosts)
        return Permissions(
            publish=(
                *writing,
                quarantine,
                *(f"$KV.{bucket}.{n}" for n in names),
                *_READ_API,
                f"$JS.API.STREAM.CREATE.{stream}_QUARANTINE",
                f"$JS.API.STREAM.CREATE.{stream}_SNAPSHOTS",
                f"$JS.API.STREAM.CREATE.KV_{bucket}",
                *(f"{CONSOLES}.{n}.>" for n in names),  # its own guests' console sessions only
            ),
            publish_deny=("$JS.API.CONSUMER.DELETE.>", *(f"{prefix}.{p}" for p in identity.refuses)),
            subscribe=(
                *subscribe,
                *(f"{HOST_RPC}.{n}.>" for n in names),
                *(f"{CONSOLES}.{n}.>" for n in names),
            ),
            allow_responses=True,
        )
    # auditor, integrator: read only
    return Permissions(
        publish=_READ_API,
        publish_deny=("$JS.API.CONSUMER.DELETE.>",),
        subscribe=(*subscribe, "versioned_notifications.>"),
    )


def prepare(
    settings: Settings, directory: Path, *, hosts: Sequence[str] = (), simulated: Sequence[str] = ()
) -> Registry:
    """The registry in ``directory``, with a key for every identity ``specs`` names (new ones are
    generated, existing ones kept), and the server's ``nats.conf`` written from it."""
    path = directory / REGISTRY
    registry = Registry.load(path) if path.exists() else Registry()
    added = []
    for spec in specs(settings, hosts=hosts, simulated=simulated):
        have = registry.current(spec.name)
        wanted, refused = appends(spec.role, spec.hosts), refuses(spec.role)
        if have is not None and (have.appends, have.refuses, have.hosts) == (wanted, refused, spec.hosts):
            continue
        if have is not None:  # the table changed for it: its key stays, its rule is the new one
            registry = registry.without(have)
            key = have.public_key
        else:
            key = new_key(directory, spec.name).public_key
        added.append(Identity(spec.name, spec.role, key, wanted, spec.hosts, refuses=refused))
    if added:
        registry = registry.with_identities(added)
        registry.save(path)
    write_conf(registry, settings, directory)
    return registry


def rotate(settings: Settings, directory: Path, name: str, head: Callable[[], int]) -> Registry:
    """A new key for identity ``name``: the old one is retired from the log's ``head()`` + 1 on (it
    still verifies what it signed before; an event it signs at or after that position is refused),
    and may no longer connect once the server reloads ``nats.conf``. Stop the parts that sign as
    ``name`` first (docs/trust.md, "Rotating a key")."""
    path = directory / REGISTRY
    registry = Registry.load(path)
    old = registry.current(name)
    if old is None:
        raise KeyError(f"no identity {name!r} in {path}")
    at = head() + 1
    key = new_key(directory, name)
    registry = registry.retiring(name, at).with_identities(
        [Identity(old.name, old.role, key.public_key, old.appends, old.hosts, refuses=old.refuses)]
    )
    registry.save(path)
    write_conf(registry, settings, directory)
    return registry


def write_conf(registry: Registry, settings: Settings, directory: Path) -> Path:
    """``nats.conf``: the users of every identity not retired, with their permissions."""
    users = [natsconf.User(i.public_key, permissions(i, settings)) for i in registry.active]
    return natsconf.write(directory / NATS_CONF, users)


def cut_over(directory: Path, head: Callable[[], int]) -> Registry:
    """Set the signing cut-over once: every event after the log's ``head()`` must be signed.

    A fresh log cuts over at position 1; a log written before signing keeps its older events as
    unsigned (``stratus audit verify`` reports them as such) and is held to signatures from here on."""
    path = directory / REGISTRY
    registry = Registry.load(path)
    if registry.signed_from is None:
        registry = registry.cut_over(head() + 1)
        registry.save(path)
    return registry


def log_head(settings: Settings) -> int:
    """The log's last position (0: empty), the stream created if missing, as ``settings``' identity."""
    with NatsBridge(settings.nats_urls, name="stratus-trust", seed_file=settings.nats_seed_file) as bridge:
        recorder = JetStreamApplicationRecorder.from_settings(bridge, settings)
        recorder.ensure_stream()
        return recorder.max_notification_id() or 0


def seed_file(directory: Path, name: str) -> Path:
    """The seed file identity ``name`` connects and signs with."""
    return seed_path(directory, name)


def exclude(settings: Settings, position: int, reason: str) -> str:
    """Record, as the operator (``settings``' seed must be the ``admin`` identity's), that the refused
    event at ``position`` counts as nothing (``commands.exclusions``): the workers and the API then
    load its aggregate with it folded as nothing. Only the first refused event of an aggregate's
    history, as a load meets it, and not its first event; what the exclusion says."""
    from uuid import UUID

    from eventsourcing.application import AggregateNotFoundError

    from commands.app import Stratus
    from commands.exclusions import Exclusions
    from stratus.eventstore import Factory
    from stratus.eventstore.envelope import decode_message
    from stratus.eventstore.signing import UntrustedEvent
    from stratus.quarantine import position_of

    if settings.trust_registry is None or settings.nats_seed_file is None:
        raise SystemExit(
            "stratus trust exclude: set STRATUS_TRUST_REGISTRY and the admin's STRATUS_NATS_SEED_FILE"
        )
    with NatsBridge(settings.nats_urls, name="stratus-trust", seed_file=settings.nats_seed_file) as bridge:
        factory = Factory(bridge=bridge, settings=settings, verify_loads=True)
        app = Stratus(factory)
        log = factory.application_recorder()
        found = [m for m in log.read_messages(position, 1) if position_of(m) == position]
        if not found:
            raise SystemExit(f"stratus trust exclude: no event at position {position}")
        notification, envelope = decode_message(found[0])
        what = f"{envelope.type} of {notification.originator_id}"
        if notification.originator_version == 1:
            raise SystemExit(f"stratus trust exclude: {what} is its aggregate's first event")
        try:
            app.repository.get(UUID(str(notification.originator_id)))
        except UntrustedEvent as e:
            if e.position != position:
                raise SystemExit(f"stratus trust exclude: {e}; exclude that one first") from None
        else:
            raise SystemExit(f"stratus trust exclude: {what} at position {position} is not refused")
        try:
            exclusions: Exclusions = app.repository.get(Exclusions.create_id())
        except AggregateNotFoundError:
            exclusions = Exclusions()
        exclusions.exclude(position, envelope.id, str(notification.originator_id), reason)
        app.save(exclusions)
    return f"excluded: {what} at position {position}"


def main(
    settings: Settings,
    action: str,
    directory: Path,
    *,
    name: str | None,
    hosts: Sequence[str],
    reason: str = "",
) -> int:
    """``stratus trust init|show|rotate|cut-over|exclude`` on the registry in ``directory``."""
    if action == "exclude":
        if not name or not name.isdigit():
            raise SystemExit("stratus trust exclude: give the refused event's log position")
        print(exclude(settings, int(name), reason))
        return 0
    if action == "init":
        registry = prepare(settings, directory, hosts=hosts)
    elif action == "rotate":
        if not name:
            raise SystemExit("stratus trust rotate: name the identity (api, scheduler, host:<name>, ...)")
        try:
            registry = rotate(settings, directory, name, lambda: log_head(settings))
        except KeyError as e:
            raise SystemExit(f"stratus trust rotate: {e.args[0]}") from None
    elif action == "cut-over":
        registry = cut_over(directory, lambda: log_head(settings))
    else:
        registry = Registry.load(directory / REGISTRY)
    print(f"registry: {directory / REGISTRY}  (nats-server users: {directory / NATS_CONF})")
    print(f"signed from: {registry.signed_from if registry.signed_from is not None else 'not cut over yet'}")
    for i in registry.identities:
        where = str(seed_file(directory, i.name))
        if i.retired:
            where = f"retired at position {i.retired_at}" if i.retired_at is not None else "retired"
        print(f"  {i.name:<24} {i.role:<10} {i.public_key}  {where}")
    return 0
