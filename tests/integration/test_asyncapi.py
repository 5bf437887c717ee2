"""schemas/asyncapi.json against what the code really does: every event class of every aggregate in
``commands`` has a channel whose address is the subject the event store writes it to, every message
references an existing payload schema, and real messages on JetStream carry the headers it names."""

from __future__ import annotations

import re

from jsonschema import Draft202012Validator

from commands.app import Stratus
from schemas import asyncapi
from stratus.audit.rawreader import RawReader
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from tests.fixtures.facades.handlers import CreateFlavor, CreateServer, Handlers, PlaceInstance, RegisterHost


def test_real_messages_match_the_document(bridge: NatsBridge, settings: Settings) -> None:
    """Messages the event store wrote for real commands: subjects match channels, headers the schema."""
    handlers = Handlers(Stratus(Factory(bridge=bridge, settings=settings)))
    handlers.create_flavor(CreateFlavor("f1", "m1.tiny", 1, 512, 1))
    handlers.register_host(RegisterHost("cmp-1", 4, 8192, 40))
    server = handlers.create_server(CreateServer("vm", "p1", "u1", "f1"))
    handlers.place_instance(PlaceInstance(server.id, "cmp-1"))
    headers_schema = Draft202012Validator(
        asyncapi.HEADERS, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    doc = asyncapi.document(settings.subject_prefix)
    patterns = {
        name: re.compile("^" + re.escape(c["address"]).replace(r"\{id\}", "[A-Za-z0-9_-]+") + "$")
        for name, c in doc["channels"].items()
    }
    with RawReader(settings.nats_urls, settings.stream) as reader:
        msgs = list(reader.messages(f"{settings.subject_prefix}.>"))
    assert len(msgs) >= 5
    for m in msgs:
        found = re.findall(rb"\r\n([^:\r\n]+):[ \t]*([^\r\n]*)", m.header_block)
        headers = {k.decode(): v.decode() for k, v in found}
        errors = [e.message for e in headers_schema.iter_errors(headers)]
        assert errors == [], errors
        channels = [name for name, p in patterns.items() if p.match(m.subject)]
        assert len(channels) == 1, m.subject
        version = headers["ce-schemaversion"]
        assert f"{channels[0]}.v{version}" in doc["channels"][channels[0]]["messages"]
