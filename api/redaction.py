"""What members see of the log: the auditor's views, redacted as the server view is.

The server view hides from members which host a server is on (``OS-EXT-SRV-ATTR:host`` and
``hypervisor_hostname``; members get Nova's opaque ``hostId``) and the details of its faults
(tracebacks, libvirt's messages, the scheduler's filter results: Nova shows ``details`` to members
only for faults whose code is not 500, and every fault Stratus records has a string code, which
the server view answers as 500). The log's events carry both, so the views that show events or
past state to members (``/v2.1/stratus/history``, ``/v2.1/stratus/state`` and the event stream)
pass them through here: host names become ``null`` and ``details`` go, at any depth of an event's
``data`` or of a past state; a past state that was on a host gets the ``hostId`` the server view
shows. Admins (auditors) see everything. One module, so the three views cannot disagree.

It also decides which messages of the log are shown at all (``view``): a message that is not a
readable event of the store (no envelope, a payload that does not decode or nests deeper than
``MAX_DEPTH``, a type that is not a plain token) is shown to no one and logged at ERROR, and an
event of a type outside the published event schemas (``schemas/events``) is shown to auditors only,
since which of its fields the server view would hide is unknown.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

import orjson

import schemas
from api.server_views import host_id
from stratus.audit.history import Entry
from stratus.eventstore.envelope import UNDECODABLE_TOPIC

log = logging.getLogger("stratus.api")

# Keys whose values name compute hosts: Instance.Scheduled's and Offloaded's host, a move's source,
# dest and target_host, a server group member's host; the state's host and its migration's hosts.
HOST_KEYS = frozenset(
    {
        "host", "node", "hypervisor_hostname", "source", "dest", "target_host",
        "source_host", "dest_host", "source_node", "dest_node",
    }
)  # fmt: skip
# Keys whose values are failure details: for admins only.
DETAIL_KEYS = frozenset({"details"})
# What an SSE ``event:`` line may carry: a plain token (``stratus.instance.scheduled``), never a line
# break or a NUL that would end the field early or forge another message.
_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
# How deep an event's data may nest to be shown: ours nest a few levels (the API refuses bodies
# deeper than 32); orjson writes at most 255 and reads 1024, and ``redacted`` recurses per level.
MAX_DEPTH = 100


def redacted(value: Any) -> Any:
    """``value`` (an event's ``data`` or a past state) as a member may see it."""
    if isinstance(value, dict):
        return {
            key: (None if key in HOST_KEYS else redacted(item))  # a name, or names in a list or object
            for key, item in value.items()
            if key not in DETAIL_KEYS
        }
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value


def state_for_member(state: dict[str, Any]) -> dict[str, Any]:
    """A past state as a member may see it: redacted, with the server view's ``hostId`` in place of
    the host (``""`` when on none, as Nova)."""
    out = redacted(state)
    host, project = state.get("host"), state.get("project_id")
    if "host" in state and isinstance(project, str):
        out["hostId"] = host_id(project, host if isinstance(host, str) else None)
    assert isinstance(out, dict)
    return out


def event_for_member(event: dict[str, Any]) -> dict[str, Any]:
    """A structured CloudEvent (an entry's ``to_dict``) with its ``data`` redacted."""
    if "data" not in event:
        return event
    return {**event, "data": redacted(event["data"])}


@functools.cache
def _catalog() -> frozenset[str]:
    """The event types with a published schema, as ``<kind>.<type>``."""
    return frozenset(name.split("/", 1)[1].rsplit(".v", 1)[0] for name in schemas.event_schema_names())


def known_type(event_type: str) -> bool:
    """Whether ``stratus.<kind>.<type>`` has a schema in ``schemas/events`` (any version)."""
    prefix, _, rest = event_type.partition(".")
    return prefix == "stratus" and rest in _catalog()


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` lists or objects deep (without recursing)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def view(entry: Entry, *, admin: bool, where: str) -> dict[str, Any] | None:
    """The structured CloudEvent of ``entry`` as this reader may see it, or None when it is shown to
    no one (not a readable event: logged at ERROR with its position, never its payload) or not to
    this reader (an unknown type, for a member). ``where`` names the view in the log line."""
    envelope = entry.envelope
    problem = ""
    if envelope.topic == UNDECODABLE_TOPIC:
        problem = "has no event envelope"
    elif not _TYPE.fullmatch(envelope.type):
        problem = "has a type that is not a plain token"
    if not problem:
        try:
            event = entry.to_dict()
        except orjson.JSONDecodeError:
            problem = f"has a payload that does not decode as {envelope.datacontenttype}"
        else:
            if _deeper_than(event.get("data"), MAX_DEPTH):
                problem = f"has a payload nested deeper than {MAX_DEPTH} levels"
    if problem:
        log.error("%s: the message at position %d %s; skipped", where, entry.position, problem)
        return None
    if admin:
        return event
    if not known_type(envelope.type):
        log.error(
            "%s: the event at position %d has a type outside the catalog; not shown to members",
            where,
            entry.position,
        )
        return None
    return event_for_member(event)


def project_of(first: Entry, key: str = "project_id") -> str | None:
    """The project named by an aggregate's first event (``project_id`` of its data, or ``key``);
    None when it names none or its payload does not decode (then only auditors see the aggregate)."""
    if first.envelope.topic == UNDECODABLE_TOPIC:
        return None
    try:
        data = first.envelope.to_dict().get("data")
    except orjson.JSONDecodeError:
        return None
    owner = data.get(key) if isinstance(data, dict) else None
    return owner if isinstance(owner, str) else None
