"""Every event signed by the identity that appended it, and the check of who may append what.

The recorder stamps each event with its chain hash (stratus.eventstore.chain: SHA-256 over the
event's canonical bytes, which include the hash of the aggregate's previous event); the part's
``Signer`` then adds two headers: ``Trust-Key``, its public NKey (the key id), and
``Trust-Signature``, Ed25519 over ``stratus-signature-v1\\n`` + that chain hash (base64url, no
padding). Signing the chain hash signs every hashed header and the body; the two headers are not
themselves hashed (a signature cannot be inside what it signs), so the chain verifies the same
with or without them.

``Verifier`` decides, for one stored event, whether it is trusted:

- signed: the key is in the registry, the content matches the chain hash, the signature verifies,
  and the key's identity may append on the event's subject (``Identity.appends``, matched against
  the subject rebuilt from the hashed ``ce-topic`` and ``ce-subject``: the stored subject itself is
  not covered by the hash) and it is none of its ``refuses``;
- unsigned: trusted only before the registry's cut-over position (``signed_from``): a log written
  before signing existed; at or after it, refused;
- a retired key's signature counts only at positions before the one it was retired at
  (``Identity.retired_at``).

A host's key is held to more than subjects: an event a ``host`` identity signs for a server (the
server's own, ``instance.<server>.<type>``; a usage, network or group event naming it; a move's
return on another host) is trusted only if that server is on one of the identity's hosts at that
point of the log, or a move under way names one of them as its source or destination
(``placement_refusal``). ``ServerHosts`` folds where each server is from the events that place it,
and ``InOrder`` checks a log's events in position order with that fold: the projector, a rebuild
and ``stratus audit verify`` all use it, so that they refuse exactly the same events.
``LoadCheck`` runs the same checks over the events of one aggregate as a worker's load reads them
(a server's place folded from its own history), and ``snapshot_refusal`` says whether a snapshot's
signer may have written it.

The projector quarantines a refused event (it is never applied); ``stratus audit verify`` reports it;
a worker quarantines the delivery whose load met one, and the API answers 409. ``ServerPlaces``
holds the events of other aggregates that name a server to that server's own history, for a load
and the scheduler's host feed. The operator may exclude a refused event (``exclusions``: an
``admin``'s ``EventExcluded`` naming its position): a load then folds it as ``Excluded``, nothing,
as the projector, which never applied it, has it.
"""

from __future__ import annotations

import base64
import binascii
import enum
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from uuid import NAMESPACE_URL, uuid5

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from eventsourcing.domain import Aggregate
from eventsourcing.utils import get_topic

from stratus.eventstore import chain
from stratus.eventstore.envelope import APPEND_ID
from stratus.eventstore.subjects import encode_token, kind_and_type
from stratus.trust.nkeys import InvalidKey, KeyPair, decode_public, verify
from stratus.trust.registry import Identity, Registry

SIGNER = "Trust-Key"
SIGNATURE = "Trust-Signature"
_SIGNER = SIGNER.lower()
_SIGNATURE = SIGNATURE.lower()
_HASH = chain.CHAIN_HASH.lower()
_APPEND = APPEND_ID.lower()
_CONTEXT = b"stratus-signature-v1\n"
# What a snapshot's signature is made over: the snapshot's digest (stratus.eventstore.snapshot_stream:
# SHA-256 over its aggregate id, version, topic and state), in a context of its own (a snapshot's
# signature is never an event's).
_SNAPSHOT_CONTEXT = b"stratus-snapshot-v1\n"


def signed_bytes(chain_hash: str) -> bytes:
    """What a signature is made over: the event's chain hash, in a context of its own."""
    return _CONTEXT + chain_hash.encode()


class Signer:
    """One part's signing key: ``sign`` adds the signature headers to an event's headers."""

    def __init__(self, key: KeyPair) -> None:
        self._key = key
        self.key_id = key.public_key

    @classmethod
    def from_seed_file(cls, path: Path) -> Signer:
        return cls(KeyPair.from_seed(path.read_text().strip()))

    def sign(self, headers: dict[str, str]) -> None:
        """Sign the event whose headers (its ``Stratus-Chain-Hash`` set) are ``headers``."""
        self._sign(signed_bytes(headers[chain.CHAIN_HASH]), headers)

    def sign_snapshot(self, digest: str, headers: dict[str, str]) -> None:
        """Sign the snapshot whose digest (``snapshot_stream``'s SHA-256 of it) is ``digest``."""
        self._sign(_SNAPSHOT_CONTEXT + digest.encode(), headers)

    def _sign(self, message: bytes, headers: dict[str, str]) -> None:
        signature = self._key.sign(message)
        headers[SIGNER] = self.key_id
        headers[SIGNATURE] = base64.urlsafe_b64encode(signature).decode().rstrip("=")


class UntrustedEvent(Exception):
    """An event whose signer may not have appended it (or that no one signed after the cut-over);
    ``position``: where it is stored, when a load met it in an aggregate's history."""

    def __init__(self, reason: str, position: int | None = None) -> None:
        super().__init__(reason)
        self.position = position


class Excluded(Aggregate.Event):
    """What a load folds in place of a refused event the operator excluded (``exclusions``): the
    aggregate's version moves past it and nothing else changes, as the projector, which never
    applies a refused event, has it."""


# The operator's exclusions of refused events (docs/trust.md, "A forged event in a history: the
# operator's exclusion"): one aggregate of kind ``EXCLUSIONS_KIND`` (commands.exclusions), whose
# ``eventexcluded`` events name a log position; only an ``admin`` identity's count.
EXCLUSIONS_KIND = "exclusions"
EXCLUSIONS_ID = uuid5(NAMESPACE_URL, "urn:stratus:trust:refused-events")
EXCLUDED_TYPE = "eventexcluded"
EXCLUDED_TOPIC = get_topic(Excluded)


class Verdict(enum.Enum):
    """What the check of one event found."""

    SIGNED = "signed"  # signed by an identity that may append it
    UNSIGNED = "unsigned"  # no signature, before the cut-over: a log from before signing
    REFUSED = "refused"


@dataclass(frozen=True)
class Check:
    """The verdict on one event, the identity that signed it, and why it is refused."""

    verdict: Verdict
    identity: Identity | None = None
    reason: str = ""


def matches(pattern: str, subject: str) -> bool:
    """Whether NATS subject ``subject`` matches ``pattern`` (``*``: one token, ``>``: the rest)."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


class Verifier:
    """Checks stored events against a deployment's registry of identities."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._keys: dict[str, Ed25519PublicKey] = {}

    @classmethod
    def load(cls, path: Path | None) -> Verifier | None:
        """The verifier of the registry at ``path`` (``Settings.trust_registry``; None: no checks)."""
        return cls(Registry.load(path)) if path is not None else None

    def check(self, headers: Mapping[str, str], body: bytes, position: int) -> Check:
        """The verdict on the event stored at ``position`` with ``headers`` (names in any case)."""
        h = {k.lower(): v for k, v in headers.items()}
        key_id, signature = h.get(_SIGNER, ""), h.get(_SIGNATURE, "")
        if not key_id and not signature:
            cut = self.registry.signed_from
            if cut is None or position < cut:
                return Check(Verdict.UNSIGNED)
            return Check(Verdict.REFUSED, reason=f"unsigned, at or after the signing cut-over ({cut})")
        identity = self.registry.by_key(key_id)
        if identity is None:
            return Check(
                Verdict.REFUSED, reason=f"signed by a key the registry does not know ({key_id[:12]}...)"
            )
        stored = h.get(_HASH, "")
        if not stored or chain.event_hash(h, body) != stored:
            return Check(Verdict.REFUSED, identity, "its content does not match its chain hash")
        if not self._verifies(key_id, signature, stored):
            return Check(Verdict.REFUSED, identity, f"the signature of {identity.name} does not verify")
        if identity.retired_at is not None and position >= identity.retired_at:
            return Check(
                Verdict.REFUSED,
                identity,
                f"signed by a key of {identity.name} retired at position {identity.retired_at}",
            )
        subject = _relative_subject(h)
        if (
            subject is None
            or not any(matches(p, subject) for p in identity.appends)
            or any(matches(p, subject) for p in identity.refuses)
        ):
            return Check(
                Verdict.REFUSED, identity, f"{identity.name} ({identity.role}) may not append {subject}"
            )
        return Check(Verdict.SIGNED, identity)

    def refusal(self, headers: Mapping[str, str], body: bytes, position: int) -> UntrustedEvent | None:
        """Why the event may not be applied (an ``UntrustedEvent`` to quarantine), or None."""
        c = self.check(headers, body, position)
        return UntrustedEvent(c.reason) if c.verdict is Verdict.REFUSED else None

    def _verifies(self, key_id: str, signature: str, chain_hash: str) -> bool:
        return self._verifies_over(key_id, signature, signed_bytes(chain_hash))

    def _verifies_over(self, key_id: str, signature: str, message: bytes) -> bool:
        key = self._keys.get(key_id)
        if key is None:
            try:
                key = self._keys[key_id] = decode_public(key_id)
            except InvalidKey:
                return False
        try:
            raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
        except (binascii.Error, ValueError):
            return False
        return verify(key, raw, message)


def _relative_subject(h: Mapping[str, str]) -> str | None:
    """``<kind>.<originator>.<type>``, rebuilt from the hashed headers (what the writer published on)."""
    topic, originator = h.get("ce-topic"), h.get("ce-subject")
    if topic is None or originator is None:
        return None
    kind, type_ = kind_and_type(topic)
    return f"{kind}.{encode_token(originator)}.{type_}"


# The instance events (subject type tokens) that change which hosts may append a server's events,
# and the payload fields naming those hosts (commands.instance): where the scheduler put it, where
# a move takes it, where a move's end leaves it.
PLACING = (
    "scheduled",
    "offloaded",
    "migrationscheduled",
    "migrationfinished",
    "migrationfailed",
    "revertedondest",
    "resizeconfirmed",
    "resizereverted",
)
INSTANCE_KIND = "instance"


# The other aggregate kinds a host appends for the servers it runs (processes.trust.HOST_KINDS but
# the instance's): their events name the server in their payload (``instance_id``), and a host's
# key on one is held to where that server is, as on the server's own events. An event of these
# kinds that names no server (a usage epoch opened, a network defined, an image's usage) is held to
# its subject only.
PER_SERVER_KINDS = ("projectusage", "network", "servergroup", "groupmembership", "imageusage")
HOST_KIND = "host"


@dataclass(frozen=True)
class _Where:
    host: str | None = None  # the host the server is on (None: on none, or never placed)
    moving: tuple[str, ...] = ()  # the source and destination of a move under way

    def permits(self, hosts: Iterable[str]) -> bool:
        return any(h == self.host or h in self.moving for h in hosts)


@dataclass(frozen=True)
class Placement:
    """One server's place as ``ServerHosts`` folded it: where it is, and where it was before the
    last event that moved it with the append that event was part of (the events appended with it,
    e.g. a host's release of the claim with the ``Offloaded`` that takes the server off it, are
    judged by where the server was)."""

    now: _Where = _Where()
    before: _Where | None = None
    moved_by: str = ""  # the ``Stratus-Append-Id`` of the append that last moved it

    def permits(self, hosts: Iterable[str], append: str) -> bool:
        hosts = tuple(hosts)
        if self.now.permits(hosts):
            return True
        return (
            bool(append)
            and append == self.moved_by
            and self.before is not None
            and self.before.permits(hosts)
        )


class ServerHosts:
    """Where each server is at the current point of the log, folded from the events that place it
    (``PLACING``), to tell a host's own servers from others'. Pure: no I/O, never raises."""

    def __init__(self) -> None:
        self._at: dict[str, Placement] = {}
        self._migrations: dict[str, str] = {}  # migration id -> the server it moves

    def permits(self, hosts: Iterable[str], server_id: str, append: str = "") -> bool:
        """Whether a host of ``hosts`` may append events of ``server_id`` now (``append``: the
        event's append id, for the events appended with the one that last moved the server)."""
        placed = self._at.get(server_id)
        return placed is not None and placed.permits(hosts, append)

    def placement(self, server_id: str) -> Placement | None:
        return self._at.get(server_id)

    def place(self, server_id: str, placement: Placement) -> None:
        """Start from ``placement`` for ``server_id`` (a fold kept from an earlier read)."""
        self._at[server_id] = placement

    def server_of(self, migration_id: str) -> str | None:
        """The server a move (``MigrationScheduled``'s ``migration_id``) moves, if folded."""
        return self._migrations.get(migration_id)

    def describe(self, server_id: str) -> str:
        placed = self._at.get(server_id)
        where = placed.now if placed is not None else None
        if where is None or (where.host is None and not where.moving):
            return "it is on no host"
        moving = f" (moving between {' and '.join(where.moving)})" if where.moving else ""
        return f"it is on {where.host}{moving}"

    def observe(self, type_: str, server_id: str, body: bytes, append: str = "") -> None:
        """Fold one trusted instance event of type token ``type_`` (ignored unless ``PLACING``),
        appended by the append ``append``."""
        if type_ not in PLACING:
            return
        payload = _payload(body)
        if payload is None:
            return  # the projector quarantines it as undecodable; it places nothing
        placed = self._at.get(server_id, Placement())
        where = placed.now

        def named(field: str) -> str | None:
            value = payload.get(field)
            return value if isinstance(value, str) else None

        if type_ == "scheduled":
            where = _Where(named("host"), ())
        elif type_ == "offloaded":
            where = _Where(None, ())
        elif type_ == "migrationscheduled":
            where = _Where(where.host, tuple(h for h in (named("source"), named("dest")) if h))
            migration = named("migration_id")
            if migration:
                self._migrations[migration] = server_id
        elif type_ == "migrationfinished":
            where = _Where(named("dest"), where.moving)
        elif type_ == "revertedondest":
            where = _Where(named("source"), where.moving)
        elif type_ == "migrationfailed":
            where = _Where(named("source"), ())
        else:  # resizeconfirmed, resizereverted: the move is over, the server stays where it is
            where = _Where(where.host, ())
        before = placed.now if append != placed.moved_by or not append else placed.before
        self._at[server_id] = Placement(where, before, append)


def _payload(body: bytes) -> dict[str, object] | None:
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) else None


def placement_refusal(
    servers: ServerHosts, identity: Identity | None, h: Mapping[str, str], body: bytes
) -> str:
    """Why a host's signed event (``h``: its headers, lowercased) may not be appended where the
    servers are (``servers``: the fold up to it), or "" when it may. Checked: a server's own
    events; the other kinds a host appends for its servers (``PER_SERVER_KINDS``) that name a
    server; and a move's return events on another host than its own (``host.*.instancereleased``,
    ...), by the server they name or their move's server. Other identities' events: ""."""
    if identity is None or identity.role != "host":
        return ""
    topic, originator = h.get("ce-topic"), h.get("ce-subject")
    if topic is None or originator is None:
        return ""
    kind, type_ = kind_and_type(topic)
    if kind == INSTANCE_KIND:
        named: tuple[str, ...] = (originator,)
    elif kind in PER_SERVER_KINDS or (kind == HOST_KIND and not _own_host(identity, h)):
        named = _servers_named(servers, body)
        if not named and kind == HOST_KIND:
            return f"{identity.name} (host) may not append {type_} on another host: it names no server moving"
    else:
        return ""
    append = h.get(_APPEND, "")
    for server in named:
        if not servers.permits(identity.hosts, server, append):
            what = f"{type_} of server" if kind == INSTANCE_KIND else f"{kind} {type_} for server"
            return f"{identity.name} (host) may not append {what} {server}: {servers.describe(server)}"
    return ""


def _own_host(identity: Identity, h: Mapping[str, str]) -> bool:
    """Whether the event is on one of the identity's own hosts (``host.<its host's id>.>``), not on
    another host through a move's return (``host.*.<type>``)."""
    subject = _relative_subject(h)
    return subject is not None and any(
        matches(p, subject)
        for p in identity.appends
        if p.startswith(f"{HOST_KIND}.") and not p.startswith("host.*.")
    )


def _servers_named(servers: ServerHosts, body: bytes) -> tuple[str, ...]:
    """The server an event's payload names: its ``instance_id``, else the server its move
    (``migration_id``) moves, if a ``MigrationScheduled`` made that move; () when none."""
    payload = _payload(body)
    if payload is None:
        return ()
    instance = payload.get("instance_id")
    if isinstance(instance, str):
        return (instance,)
    migration = payload.get("migration_id")
    server = servers.server_of(migration) if isinstance(migration, str) else None
    return (server,) if server is not None else ()


# (position, headers, body) of the stored events between two positions that ``InOrder`` has not
# seen: the projector reads them from the log when it starts after position 1 (only the
# ``PLACING`` subjects are needed).
History = Callable[[int, int], Iterable[tuple[int, Mapping[str, str], bytes]]]


class InOrder:
    """``Verifier.check`` over a log read in position order, with each server's hosts folded as it
    goes (``ServerHosts``): an event a host's key signed for a server (``placement_refusal``) is
    refused unless the server is on that host, or a move under way names it. ``history(after,
    upto)``: the events of a gap (positions after ``after``, up to ``upto``) when a check skips
    ahead, e.g. a projector that starts from its tracking position; None: gaps hold nothing that
    places a server."""

    def __init__(self, verifier: Verifier, history: History | None = None) -> None:
        self.verifier = verifier
        self.registry = verifier.registry
        self.servers = ServerHosts()
        self.position = 0  # the last position folded
        self._history = history
        self._refused: dict[int, Check] = {}  # host refusals already made (a batch read again)

    def check(self, headers: Mapping[str, str], body: bytes, position: int) -> Check:
        """The verdict on the event at ``position``; events are expected in increasing positions
        (one already checked is answered as it was)."""
        if position <= self.position:
            return self._refused.get(position) or self.verifier.check(headers, body, position)
        if position > self.position + 1 and self._history is not None:
            for at, h, b in self._history(self.position, position - 1):
                if self.position < at < position:
                    self._step(h, b, at)
        return self._step(headers, body, position)

    def refusal(self, headers: Mapping[str, str], body: bytes, position: int) -> UntrustedEvent | None:
        c = self.check(headers, body, position)
        return UntrustedEvent(c.reason) if c.verdict is Verdict.REFUSED else None

    def _step(self, headers: Mapping[str, str], body: bytes, position: int) -> Check:
        self.position = position
        c = self.verifier.check(headers, body, position)
        if c.verdict is Verdict.REFUSED:
            return c
        h = {k.lower(): v for k, v in headers.items()}
        reason = placement_refusal(self.servers, c.identity, h, body)
        if reason:
            refused = Check(Verdict.REFUSED, c.identity, reason)
            self._refused[position] = refused
            return refused
        _observe(self.servers, h, body)
        return c


def _observe(servers: ServerHosts, h: Mapping[str, str], body: bytes) -> None:
    """Fold a trusted event into ``servers`` (only an instance's placing events move a server)."""
    topic, server = h.get("ce-topic"), h.get("ce-subject")
    if topic is None or server is None:
        return
    kind, type_ = kind_and_type(topic)
    if kind == INSTANCE_KIND:
        servers.observe(type_, server, body, h.get(_APPEND, ""))


# One stored event of an aggregate as a load reads it: (its version, its log position, its
# headers, its body).
Loaded = tuple[int, int, Mapping[str, str], bytes]


# One server's stored events (``instance.<server>.*``), in version order, as a load reads them.
ServerHistory = Callable[[str], Sequence[Loaded]]


class ServerPlaces:
    """Check 6 away from the log's order, for the events a host's key signs that name a server in
    their payload (``PER_SERVER_KINDS``, a move's return on another host): where the server was at
    the event's position, folded from the server's own history before it (its placing events are its
    own; only those that pass the checks move it, as in ``InOrder``), read with ``history``. A worker's
    load of a usage, network, group or host aggregate and the scheduler's host feed use it, so that
    they refuse what the projector refuses. A move's return that names only its migration
    (``MigrationReleased``) names its server through the fold of the whole log's moves, which one
    server's history does not give: it is held to checks 1 to 5 here. The places each server's
    history put it in are kept (up to ``keep`` servers; a few small tuples each), and its history is
    read again only for an event after the position it was read for. Thread-safe."""

    def __init__(
        self,
        verifier: Verifier,
        history: ServerHistory,
        *,
        keep: int = 10_000,
        confirm: ServerHistory | None = None,
    ) -> None:
        self.verifier = verifier
        self._history = history
        # A refusal is made only on a history read from where nothing can be behind (the stream's
        # leader): ``history`` may be answered by a replica that has not stored the server's latest
        # events yet (a follower restarting), which would refuse a host's event for its own server.
        self._confirm = confirm
        self._keep = keep
        self._lock = threading.Lock()
        # server -> (the position its history was read for, each place it was put in from where)
        self._read: OrderedDict[str, tuple[int, tuple[tuple[int, Placement], ...]]] = OrderedDict()

    def refusal(self, c: Check, headers: Mapping[str, str], body: bytes, position: int) -> str:
        """Why the event at ``position`` (``c``: its checks 1 to 5, passed) may not be appended where
        the server it names was then, or "". Only a host's events of the kinds above are judged."""
        identity = c.identity
        if identity is None or identity.role != "host":
            return ""
        h = {k.lower(): v for k, v in headers.items()}
        kind, _ = kind_and_type(h.get("ce-topic", ""))
        if not (kind in PER_SERVER_KINDS or (kind == HOST_KIND and not _own_host(identity, h))):
            return ""
        payload = _payload(body)
        server = payload.get("instance_id") if payload is not None else None
        if not isinstance(server, str):
            return ""  # names no server (or only a migration): checks 1 to 5
        reason = placement_refusal(self._fold(server, position), identity, h, body)
        if reason and self._confirm is not None:
            self._keep_places(server, position, self._places(self._confirm(server)))
            reason = placement_refusal(self._fold(server, position), identity, h, body)
        return reason

    def _fold(self, server: str, position: int) -> ServerHosts:
        """Where ``server`` was just before ``position``."""
        with self._lock:
            kept = self._read.get(server)
        if kept is None or kept[0] < position:
            kept = self._keep_places(server, position, self._places(self._history(server)))
        servers = ServerHosts()
        for at, placement in kept[1]:
            if at >= position:
                break
            servers.place(server, placement)
        return servers

    def _keep_places(
        self, server: str, position: int, places: tuple[tuple[int, Placement], ...]
    ) -> tuple[int, tuple[tuple[int, Placement], ...]]:
        kept = (position, places)
        with self._lock:
            self._read[server] = kept
            self._read.move_to_end(server)
            while len(self._read) > self._keep:
                self._read.popitem(last=False)
        return kept

    def _places(self, history: Sequence[Loaded]) -> tuple[tuple[int, Placement], ...]:
        """Each place a server's ``history`` put it in: (the position of the event that moved it,
        the place after it); only the events that pass the checks move it."""
        servers = ServerHosts()
        places: list[tuple[int, Placement]] = []
        server = ""
        for _version, at, headers, body in history:
            if not _placing(headers):
                continue
            c = self.verifier.check(headers, body, at)
            if c.verdict is Verdict.REFUSED:
                continue
            h = {k.lower(): v for k, v in headers.items()}
            if placement_refusal(servers, c.identity, h, body):
                continue
            _observe(servers, h, body)
            server = h.get("ce-subject", "")
            places.append((at, servers.placement(server) or Placement()))
        return tuple(places)


def _placing(headers: Mapping[str, str]) -> bool:
    h = {k.lower(): v for k, v in headers.items()}
    kind, type_ = kind_and_type(h.get("ce-topic", ""))
    return kind == INSTANCE_KIND and type_ in PLACING


class LoadCheck:
    """The checks of ``InOrder`` over one aggregate's events as a load reads them (docs/trust.md):
    a worker deciding on a server's state first checks every event it folds, so that an event the
    projector refuses is not believed by the worker either. A server's own events are held to where
    it is, folded from its own history (its placing events are its own), kept per server between
    loads so that a load that reads only the newest events (a cached aggregate) need not read the
    rest again. The events of the kinds that name servers in their payloads (a usage, network or
    group event, a move's return on another host) get checks 1 to 5 and, with ``history`` (a
    server's stored events), check 6 against the history of the server each names
    (``ServerPlaces``). Thread-safe (a worker's threads share their recorder)."""

    def __init__(
        self,
        verifier: Verifier,
        *,
        keep: int = 100_000,
        history: ServerHistory | None = None,
        confirm: ServerHistory | None = None,
        excluded: Callable[[], frozenset[int]] | None = None,
    ) -> None:
        self.verifier = verifier
        self._keep = keep
        places = ServerPlaces(verifier, history, keep=keep, confirm=confirm) if history is not None else None
        self.places = places
        self._excluded = excluded  # the positions the operator excluded (read when a refusal is met)
        self._lock = threading.Lock()
        self._folds: OrderedDict[str, tuple[int, Placement]] = OrderedDict()  # server -> (version, place)

    def check(self, originator_id: str, events: Sequence[Loaded], excluded: set[int] | None = None) -> bool:
        """Check ``events`` (one aggregate's, in version order); raises ``UntrustedEvent`` for the
        first refused that the operator did not exclude, and adds those excluded to ``excluded``
        (the load folds them as ``Excluded``). False: a server's events that start after a version
        its fold is not kept at; check its whole history instead (the events from version 1)."""
        if not events:
            return True
        met = excluded if excluded is not None else set()
        first = {k.lower(): v for k, v in events[0][2].items()}
        kind, _ = kind_and_type(first.get("ce-topic", ""))
        if kind != INSTANCE_KIND:
            for version, position, headers, body in events:
                c = self.verifier.check(headers, body, position)
                if self._refuse(originator_id, version, position, c, met):
                    continue
                reason = self.places.refusal(c, headers, body, position) if self.places else ""
                if reason:
                    self._refuse(
                        originator_id, version, position, Check(Verdict.REFUSED, c.identity, reason), met
                    )
            return True
        with self._lock:
            kept = self._folds.get(originator_id)
        folded, placement = kept if kept is not None else (0, None)
        todo = [e for e in events if e[0] > folded]
        if not todo:
            return True
        if todo[0][0] != folded + 1:
            return False
        servers = ServerHosts()
        if placement is not None:
            servers.place(originator_id, placement)
        for version, position, headers, body in todo:
            folded = version
            c = self.verifier.check(headers, body, position)
            if self._refuse(originator_id, version, position, c, met):
                continue  # excluded: it places nothing
            h = {k.lower(): v for k, v in headers.items()}
            reason = placement_refusal(servers, c.identity, h, body)
            if reason and self._refuse(
                originator_id, version, position, Check(Verdict.REFUSED, c.identity, reason), met
            ):
                continue
            _observe(servers, h, body)
        with self._lock:
            if originator_id not in self._folds or self._folds[originator_id][0] < folded:
                self._folds[originator_id] = (folded, servers.placement(originator_id) or Placement())
            self._folds.move_to_end(originator_id)
            while len(self._folds) > self._keep:
                self._folds.popitem(last=False)
        return True

    def _refuse(self, originator_id: str, version: int, position: int, c: Check, met: set[int]) -> bool:
        """True when ``c`` refuses an event the operator excluded (added to ``met``); raises
        ``UntrustedEvent`` when it refuses one not excluded; False when it does not refuse. An
        aggregate's first event cannot be excluded (nothing would be left to fold)."""
        if c.verdict is not Verdict.REFUSED:
            return False
        if version > 1 and self._excluded is not None and position in self._excluded():
            met.add(position)
            return True
        raise UntrustedEvent(
            f"the history of {originator_id} holds an event refused at position {position}: {c.reason}",
            position,
        )


def snapshot_refusal(
    verifier: Verifier, headers: Mapping[str, str], digest: str, kind: str, originator: str
) -> str:
    """Why a snapshot of aggregate ``originator`` (of ``kind``) whose content has digest ``digest``
    may not be used, or "". A snapshot is trusted when signed by a known key not retired, whose
    identity may append the aggregate's events; a host's, only of its own host's aggregates (a
    host's key on a snapshot of a server, a network or a project's usage could plant any state,
    which no subject rule can tell: those loads replay the events instead)."""
    h = {k.lower(): v for k, v in headers.items()}
    key_id, signature = h.get(_SIGNER, ""), h.get(_SIGNATURE, "")
    if not key_id or not signature:
        return "unsigned"
    identity = verifier.registry.by_key(key_id)
    if identity is None:
        return f"signed by a key the registry does not know ({key_id[:12]}...)"
    if identity.retired:
        return f"signed by a retired key of {identity.name}"
    if not verifier._verifies_over(key_id, signature, _SNAPSHOT_CONTEXT + digest.encode()):
        return f"the signature of {identity.name} does not verify"
    return snapshot_writer_refusal(identity, kind, originator)


def snapshot_writer_refusal(identity: Identity, kind: str, originator: str) -> str:
    """Why ``identity`` may not write a snapshot of aggregate ``originator`` (of ``kind``), or "":
    it must be allowed to append the aggregate's events, and a host only its own host's."""
    subject = f"{kind}.{encode_token(originator)}.snapshot"
    own = identity.role != "host" or kind not in (INSTANCE_KIND, *PER_SERVER_KINDS, "consumer")
    if not own or not any(matches(p, subject) for p in identity.appends if not p.startswith("host.*.")):
        return f"{identity.name} ({identity.role}) may not write a snapshot of {kind} {originator}"
    return ""


@dataclass(frozen=True)
class Exclusion:
    """What an ``EventExcluded`` says: the excluded event's position and id, and the operator's reason."""

    position: int
    event_id: str
    reason: str


def exclusion(headers: Mapping[str, str], body: bytes) -> Exclusion | None:
    """The exclusion an event of the exclusions aggregate records (None: the event is no
    ``EventExcluded``, or names no position), whoever signed it."""
    h = {k.lower(): v for k, v in headers.items()}
    if kind_and_type(h.get("ce-topic", "")) != (EXCLUSIONS_KIND, EXCLUDED_TYPE):
        return None
    payload = _payload(body)
    position = payload.get("position") if payload is not None else None
    if payload is None or not isinstance(position, int):
        return None
    return Exclusion(position, str(payload.get("event_id", "")), str(payload.get("reason", "")))


def exclusions(verifier: Verifier, events: Iterable[tuple[int, Mapping[str, str], bytes]]) -> frozenset[int]:
    """The positions the operator excluded, from the stored events (position, headers, body) of the
    exclusions aggregate (``EXCLUSIONS_ID``): only those an ``admin`` identity signed count."""
    found: set[int] = set()
    for position, headers, body in events:
        c = verifier.check(headers, body, position)
        if c.verdict is not Verdict.SIGNED or c.identity is None or c.identity.role != "admin":
            continue
        excluded = exclusion(headers, body)
        if excluded is not None:
            found.add(excluded.position)
    return frozenset(found)
