"""What members see of the log: the auditor's views, redacted as the server view is.

The server view hides from members which host a server is on (``OS-EXT-SRV-ATTR:host``; members get
Nova's opaque ``hostId``) and the details of its faults (tracebacks, libvirt's messages, the
scheduler's filter results). The log's events carry both, so the views that show events or past
state to members (``/v2.1/stratus/history``, ``/v2.1/stratus/state`` and the event stream) pass them
through here: host names become ``null`` and ``details`` go, at any depth of an event's ``data`` or of
a past state. Admins (auditors) see everything. One function, so the three views cannot disagree.
"""

from __future__ import annotations

from typing import Any

# Keys whose values name compute hosts (Instance.Scheduled's host, a move's source and target_host,
# the state's host and its migration's hosts).
HOST_KEYS = frozenset({"host", "node", "source", "target_host", "source_host", "dest_host", "dest_node"})
# Keys whose values are failure details: for admins only.
DETAIL_KEYS = frozenset({"details"})


def redacted(value: Any) -> Any:
    """``value`` (an event's ``data`` or a past state) as a member may see it."""
    if isinstance(value, dict):
        return {
            key: (None if key in HOST_KEYS and isinstance(item, str) else redacted(item))
            for key, item in value.items()
            if key not in DETAIL_KEYS
        }
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value


def event_for_member(event: dict[str, Any]) -> dict[str, Any]:
    """A structured CloudEvent (an entry's ``to_dict``) with its ``data`` redacted."""
    if "data" not in event:
        return event
    return {**event, "data": redacted(event["data"])}
