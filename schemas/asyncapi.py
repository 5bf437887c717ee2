"""The AsyncAPI 3.0 document of the event log (``schemas/asyncapi.json``), generated from schemas/events.

One channel per event type (its NATS subject with the aggregate id as a parameter), one message per
schema version, each payload a ``$ref`` to ``events/<kind>.<type>.v<N>.json``, the CloudEvents NATS
binding's headers described once. ``python -m schemas.asyncapi --write`` regenerates the file after
an event schema is added; tests/unit/test_asyncapi_document.py fails until it is, and checks it against
the real event classes and the subjects the event store writes.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from schemas import event_schema_names, load

DEFAULT_PREFIX = "stratus.ev"
NOTIFICATION_PREFIX = "versioned_notifications"
_NAME = re.compile(r"^events/([a-z0-9_-]+)\.([a-z0-9_-]+)\.v(\d+)\.json$")
_HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}

# The message headers (CloudEvents 1.0 NATS protocol binding, binary content mode, plus Stratus's).
HEADERS: dict[str, Any] = {
    "type": "object",
    "required": [
        "ce-specversion",
        "ce-id",
        "ce-source",
        "ce-type",
        "ce-subject",
        "ce-time",
        "content-type",
        "ce-originatorversion",
        "ce-schemaversion",
        "ce-topic",
        "Stratus-Chain-Prev",
        "Stratus-Chain-Hash",
    ],
    "properties": {
        "ce-specversion": {"const": "1.0"},
        "ce-id": {"type": "string", "description": "<aggregate id>:<version>; also Nats-Msg-Id"},
        "ce-source": {"type": "string", "description": "/stratus/<cloud name>"},
        "ce-type": {"type": "string", "description": "stratus.<kind>.<type>"},
        "ce-subject": {"type": "string", "description": "the aggregate (resource) id"},
        "ce-time": {"type": "string", "format": "date-time"},
        "content-type": {"enum": ["application/json", "application/octet-stream"]},
        "ce-correlationid": {"type": "string", "description": "the conversation: the first request's id"},
        "ce-causationid": {"type": "string", "description": "the event or command that caused this one"},
        "ce-actoruser": {"type": "string"},
        "ce-actorproject": {"type": "string"},
        "ce-actorroles": {"type": "string", "description": "comma-separated"},
        "ce-requestid": {"type": "string"},
        "ce-schemaversion": {
            "type": "string",
            "pattern": "^[0-9]+$",
            "description": "the payload's schema version N",
        },
        "ce-originatorversion": {
            "type": "string",
            "pattern": "^[0-9]+$",
            "description": "the aggregate version",
        },
        "ce-topic": {"type": "string", "description": "eventsourcing topic module:Class.Event"},
        "Stratus-Id-Type": {"enum": ["uuid", "str"]},
        "Stratus-Append-Id": {"type": "string"},
        "Stratus-Chain-Prev": {
            **_HEX64,
            "description": "hash of the aggregate's previous event (docs/audit.md)",
        },
        "Stratus-Chain-Hash": {
            **_HEX64,
            "description": "SHA-256 of this event's canonical bytes (docs/audit.md)",
        },
        "Nats-Msg-Id": {"type": "string"},
    },
}


def _event_types() -> dict[tuple[str, str], list[int]]:
    types: dict[tuple[str, str], list[int]] = defaultdict(list)
    for name in event_schema_names():
        m = _NAME.match(name)
        if m is not None:
            types[(m.group(1), m.group(2))].append(int(m.group(3)))
    return {k: sorted(v) for k, v in sorted(types.items())}


# Nova's versioned notifications that projections/notifications.py publishes (a test holds the two equal).
NOTIFICATION_EVENT_TYPES = (
    "instance.create.start", "instance.create.end", "instance.create.error",
    "instance.delete.start", "instance.delete.end", "instance.lock", "instance.unlock", "instance.update",
    *sorted(
        f"instance.{a}.{p}"
        for a in ("pause", "power_off", "power_on", "reboot", "resume", "suspend", "unpause")
        for p in ("start", "end", "error")
    ),
    "instance.resize.end", "instance.resize.error", "instance.resize.start",
    "instance.resize_confirm.end", "instance.resize_confirm.start",
    "instance.resize_finish.end", "instance.resize_finish.start",
    "instance.resize_prep.end", "instance.resize_prep.start",
    "instance.resize_revert.end", "instance.resize_revert.start",
)  # fmt: skip


def notification_types() -> list[str]:
    return sorted(NOTIFICATION_EVENT_TYPES)


def document(prefix: str = DEFAULT_PREFIX) -> dict[str, Any]:
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for (kind, type_), versions in _event_types().items():
        channel = f"{kind}.{type_}"
        refs = {}
        for v in versions:
            key = f"{kind}.{type_}.v{v}"
            schema = load(f"events/{kind}.{type_}.v{v}.json")
            messages[key] = {
                "name": f"stratus.{kind}.{type_}",
                "title": f"stratus.{kind}.{type_} v{v}",
                "summary": schema.get("description", ""),
                "contentType": "application/json",
                "headers": {"$ref": "#/components/schemas/CloudEventHeaders"},
                "payload": {"$ref": f"events/{kind}.{type_}.v{v}.json"},
                "x-schemaversion": v,
            }
            refs[key] = {"$ref": f"#/components/messages/{key}"}
        channels[channel] = {
            "address": f"{prefix}.{kind}.{{id}}.{type_}",
            "title": f"stratus.{kind}.{type_}",
            "description": f"Every {kind} {type_} event; ce-schemaversion names the payload's version.",
            "parameters": {"id": {"$ref": "#/components/parameters/id"}},
            "messages": refs,
        }
        operations[f"receive.{channel}"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{channel}"},
            "messages": [{"$ref": f"#/channels/{channel}/messages/{k}"} for k in refs],
        }
    for event_type in notification_types():
        key = f"notification.{event_type}"
        messages[key] = {
            "name": event_type,
            "title": f"Nova versioned notification {event_type}",
            "contentType": "application/json",
            "payload": {"$ref": "notifications/instance.v1.json"},
        }
        channels[key] = {
            "address": f"{NOTIFICATION_PREFIX}.{event_type}",
            "title": event_type,
            "description": "Nova's versioned notification (oslo.messaging envelope), on the stream "
            "<stream>_NOTIFICATIONS; Stratus-Source-Position names the log event it came from.",
            "messages": {key: {"$ref": f"#/components/messages/{key}"}},
        }
        operations[f"receive.{key}"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{key}"},
            "messages": [{"$ref": f"#/channels/{key}/messages/{key}"}],
        }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Stratus event log",
            "version": "1",
            "description": (
                "Every Stratus decision is one message on the JetStream stream STRATUS (subjects "
                f"{prefix}.>), a CloudEvent in the NATS protocol binding's binary content mode: the "
                "attributes are ce-* headers, the body is the event's JSON payload. Positions are stream "
                "sequences. See docs/integrators.md and docs/eventstore.md."
            ),
        },
        "defaultContentType": "application/json",
        "servers": {
            "jetstream": {
                "host": "127.0.0.1:4222",
                "protocol": "nats",
                "description": "Any server of the deployment's JetStream cluster (STRATUS_NATS_URL).",
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {
            "parameters": {
                "id": {"description": "The aggregate id, as an encoded subject token (docs/eventstore.md)."}
            },
            "schemas": {"CloudEventHeaders": HEADERS},
            "messages": messages,
        },
    }


def render(prefix: str = DEFAULT_PREFIX) -> bytes:
    return orjson.dumps(document(prefix), option=orjson.OPT_INDENT_2) + b"\n"


def path() -> Path:
    return Path(str(resources.files("schemas").joinpath("asyncapi.json")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.asyncapi", description=__doc__)
    parser.add_argument("--write", action="store_true", help="write schemas/asyncapi.json")
    args = parser.parse_args(argv)
    if args.write:
        path().write_bytes(render())
    else:
        sys.stdout.buffer.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
