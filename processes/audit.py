"""``stratus audit``: verify the log, read a resource's history or past state, export and import.

Every subcommand reads the log directly from JetStream (``STRATUS_NATS_URL``, ``STRATUS_STREAM``,
``STRATUS_SUBJECT_PREFIX``); none needs PostgreSQL or the API. The reading machinery is the kernel's
(``stratus.audit``); the domain (resource kinds, replaying aggregates, past state) is imported when a
subcommand needs it, so that ``stratus --help`` loads none of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from processes.progress import Progress
from stratus.config import Settings

if TYPE_CHECKING:  # imported by the command that uses them: every ``stratus`` command builds this parser
    from stratus.audit import history, signatures

EXIT_BROKEN = 1
EXIT_USAGE = 2


def add_parser(
    sub: Any, common: argparse.ArgumentParser, handler: Callable[[argparse.Namespace], int]
) -> None:
    """``stratus audit ...`` under the ``stratus`` command's subparsers."""
    audit = sub.add_parser(
        "audit",
        parents=[common],
        help="verify the log's hash chain; history, past state, export and import",
        description="Read the event log for auditors. See docs/audit.md.",
    )
    audit.set_defaults(handler=handler)
    cmds = audit.add_subparsers(dest="audit_command", metavar="AUDIT_COMMAND", required=True)

    v = cmds.add_parser("verify", help="prove the chain unbroken, or name the first event where it breaks")
    v.add_argument("--upto", type=int, help="check positions 1..UPTO (default: the last position)")
    v.add_argument(
        "--anchor",
        action="append",
        default=[],
        metavar="POSITION:HASH",
        help="a global hash recorded earlier (repeatable): the log up to POSITION must still give it",
    )
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.add_argument(
        "--store",
        metavar="DIR",
        help="verify a copy of nats-server's store directory (a backup, a stopped server's -sd) "
        "instead of asking the server; the stream is STRATUS_STREAM",
    )
    v.add_argument("--processes", type=int, help="with --store: worker processes (default: one per CPU)")

    h = cmds.add_parser("history", help="every event of one resource, oldest first")
    h.add_argument("kind", help="server, host, flavor or aggregate (any aggregate id)")
    h.add_argument("id")
    h.add_argument("--limit", type=int, default=None, help="at most this many events")
    h.add_argument("--marker", type=int, default=None, help="start after this position")
    h.add_argument("--json", action="store_true", help="one structured CloudEvent per line")

    s = cmds.add_parser("state", help="a resource as it was at a position or time")
    s.add_argument("kind")
    s.add_argument("id")
    s.add_argument("--as-of", required=True, help="a log position or an RFC 3339 time")

    u = cmds.add_parser("usage", help="a project's quota usage as it was at a position or time")
    u.add_argument("project_id")
    u.add_argument("--as-of", required=True, help="a log position or an RFC 3339 time")

    e = cmds.add_parser("export", help="the log (or one resource's events) as JSON Lines with chain hashes")
    e.add_argument("--resource", nargs=2, metavar=("KIND", "ID"), help="export only this resource")
    e.add_argument("-o", "--output", help="file to write (default: standard output)")

    i = cmds.add_parser("import", help="import a whole-log export into an empty stream, positions kept")
    i.add_argument("file", help="the JSON Lines file ('-' for standard input)")


def run(settings: Settings, args: argparse.Namespace, out: IO[str] = sys.stdout) -> int:
    command = args.audit_command
    if command == "verify":
        return _verify(settings, args, out)
    if command == "export":
        return _export(settings, args)
    if command == "import":
        return _import(settings, args, out)
    with _app(settings) as (app, reader):
        if command == "history":
            return _history(reader, args, out)
        if command == "state":
            return _state(app, reader, args, out)
        return _usage(app, reader, args, out)


def _aggregate_id(kind: str, resource_id: str) -> Any:
    from commands import errors, resources

    try:
        return resources.aggregate_id(kind, resource_id)
    except errors.InvalidInput as e:
        raise SystemExit(f"stratus audit: {e.message}") from e


@contextmanager
def _app(settings: Settings) -> Iterator[tuple[Any, history.LogReader]]:
    from commands.app import Stratus
    from stratus.audit import history
    from stratus.eventstore import Factory, NatsBridge

    bridge = NatsBridge(settings.nats_urls, name="stratus-audit", seed_file=settings.nats_seed_file).start()
    try:
        app = Stratus(Factory(bridge=bridge, settings=settings, ensure_stream=False))
        yield app, cast(history.LogReader, app.recorder)  # the JetStream recorder, which reads the log
    finally:
        bridge.close()


def _print(out: IO[str], obj: Any) -> None:
    out.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def _verify(settings: Settings, args: argparse.Namespace, out: IO[str]) -> int:
    from stratus.audit import verify
    from stratus.audit.filestore import FileStoreError

    anchors: dict[int, str] = {}
    for a in args.anchor:
        position, sep, value = a.partition(":")
        if not sep or not position.isdigit() or len(value) != 64:
            raise SystemExit(f"stratus audit verify: --anchor {a!r} is not POSITION:HASH (64 hex digits)")
        anchors[int(position)] = value.lower()
    if args.store:
        try:
            checking = Progress("stratus audit verify", "blocks")
            report = verify.verify_store(
                Path(args.store), settings.stream, settings.subject_prefix, upto=args.upto,
                anchors=anchors, processes=args.processes, progress=checking.update,
            )  # fmt: skip
        except FileStoreError as e:
            raise SystemExit(f"stratus audit verify: {e}") from e
    else:
        checking = Progress("stratus audit verify")
        report = verify.verify(
            settings.nats_urls, settings.stream, settings.subject_prefix, upto=args.upto, anchors=anchors,
            seed_file=settings.nats_seed_file, progress=checking.update,
        )  # fmt: skip
    checking.finish()
    signed = _signatures(settings, args, report.last_position)
    if args.json:
        _print(out, {**report.to_dict(), "signatures": signed.to_dict() if signed is not None else None})
    elif report.ok:
        out.write(
            f"OK: {report.checked} events, positions 1..{report.last_position}, chain unbroken"
            f"{f', anchors {report.anchors_checked} hold' if report.anchors_checked else ''} "
            f"({report.seconds:.2f}s, {report.events_per_second:,.0f} events/s)\n"
            f"{_describe(signed)}"
            f"anchor: {report.last_position}:{report.global_hash}\n"  # last: scripts take it from here
        )
    else:
        assert report.first_break is not None
        b = report.first_break
        out.write(
            f"BROKEN at position {b.position}{f' (event {b.event_id})' if b.event_id else ''}: {b.reason}\n"
            f"positions 1..{report.last_position} verified before it\n"
            f"{_describe(signed)}"
        )
    return 0 if report.ok and (signed is None or signed.ok) else EXIT_BROKEN


def _signatures(settings: Settings, args: argparse.Namespace, last: int) -> signatures.SignatureReport | None:
    """Who appended each event, checked against the trust registry (None: no registry named)."""
    from stratus.audit import signatures
    from stratus.eventstore.signing import Verifier

    verifier = Verifier.load(settings.trust_registry)
    if verifier is None:
        return None
    s = settings
    if args.store:
        return signatures.verify_store(Path(args.store), s.stream, s.subject_prefix, verifier, upto=last)
    return signatures.verify(
        s.nats_urls, s.stream, s.subject_prefix, verifier, upto=last, seed_file=s.nats_seed_file
    )


def _describe(signed: signatures.SignatureReport | None) -> str:
    if signed is None:
        return "signatures: not checked (no trust registry: STRATUS_TRUST_REGISTRY, docs/trust.md)\n"
    who = ", ".join(f"{name} {n}" for name, n in sorted(signed.by_identity.items())) or "none"
    cut = f"signed from position {signed.signed_from}" if signed.signed_from else "no cut-over yet"
    text = f"signatures: {signed.signed} signed ({who}), {signed.unsigned} unsigned before the cut-over"
    text += f" ({cut})\n"
    if signed.first_refused is not None:
        r = signed.first_refused
        text += (
            f"REFUSED: {signed.refused} event(s); the first at position {r.position}"
            f"{f' (event {r.event_id})' if r.event_id else ''}: {r.reason}\n"
        )
    for e in signed.excluded:
        text += (
            f"EXCLUDED: position {e.position} (event {e.event_id}), refused: {e.reason}; excluded at "
            f"position {e.excluded_at} by {e.excluded_by}: {e.because or '(no reason given)'}\n"
        )
    for v in signed.void_exclusions:
        text += f"VOID EXCLUSION at position {v.position} (event {v.event_id}): {v.reason}\n"
    return text


def _history(reader: history.LogReader, args: argparse.Namespace, out: IO[str]) -> int:
    from stratus.audit import history

    aggregate_id = _aggregate_id(args.kind, args.id)
    marker = args.marker
    left = args.limit
    found = False
    while left is None or left > 0:
        entries, marker = history.page(
            reader, aggregate_id, limit=min(left or history.MAX_PAGE, history.MAX_PAGE), marker=marker
        )
        for e in entries:
            found = True
            if args.json:
                out.write(json.dumps(e.to_dict(), sort_keys=True) + "\n")
            else:
                v = e.envelope
                actor = f"{v.actoruser}@{v.actorproject}[{','.join(v.actorroles)}]"
                out.write(
                    f"{v.position:>8}  {v.time}  {v.type:<32} {actor}  request={v.requestid} "
                    f"correlation={v.correlationid} causation={v.causationid or '-'}\n"
                )
        if left is not None:
            left -= len(entries)
        if marker is None:
            break
    if not found and args.marker is None:
        print(f"stratus audit: no history for {args.kind} {args.id}", file=sys.stderr)
        return EXIT_BROKEN
    return 0


def _as_of(value: str) -> Any:
    from projections import asof

    try:
        return asof.AsOf.parse(value)
    except asof.InvalidAsOf as e:
        raise SystemExit(f"stratus audit: {e}") from e


def _state(app: Any, reader: history.LogReader, args: argparse.Namespace, out: IO[str]) -> int:
    from uuid import UUID

    from projections import asof

    aggregate_id = _aggregate_id(args.kind, args.id)
    as_of = _as_of(args.as_of)
    if not isinstance(aggregate_id, UUID):
        raise SystemExit("stratus audit: past state needs an aggregate with a UUID id")
    past = asof.state_at(app, reader, aggregate_id, as_of)
    if past is None:
        print(f"stratus audit: {args.kind} {args.id} did not exist at {args.as_of}", file=sys.stderr)
        return EXIT_BROKEN
    _print(
        out,
        {
            "as_of": as_of.describe(),
            "version": past.version,
            "position": past.position,
            "time": past.time,
            "state": past.state,
        },
    )
    return 0


def _usage(app: Any, reader: history.LogReader, args: argparse.Namespace, out: IO[str]) -> int:
    from projections import asof

    as_of = _as_of(args.as_of)
    usage = asof.project_usage(app, reader, args.project_id, as_of)
    _print(out, {"usage": {**usage.to_dict(), "as_of": as_of.describe()}})
    return 0


def _export(settings: Settings, args: argparse.Namespace) -> int:
    from stratus.audit import export

    aggregate = str(_aggregate_id(*args.resource)) if args.resource else None
    lines = export.export_lines(
        settings.nats_urls, settings.stream, settings.subject_prefix, aggregate_id=aggregate,
        seed_file=settings.nats_seed_file,
    )  # fmt: skip
    lines = Progress("stratus audit export").counted(lines)
    if args.output:
        with open(args.output, "wb") as f:
            n = export.write_export(f, lines)
    else:
        n = export.write_export(sys.stdout.buffer, lines)
        sys.stdout.buffer.flush()
    print(f"stratus audit: exported {n} events", file=sys.stderr)
    return 0


def _import(settings: Settings, args: argparse.Namespace, out: IO[str]) -> int:
    from stratus.audit import export
    from stratus.eventstore import Factory, NatsBridge

    bridge = NatsBridge(
        settings.nats_urls, name="stratus-audit-import", seed_file=settings.nats_seed_file
    ).start()
    try:
        Factory(bridge=bridge, settings=settings).application_recorder()  # the stream, as Stratus makes it
        source: IO[bytes] = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
        try:
            lines = Progress("stratus audit import").counted(export.read_lines(source))
            n = export.import_events(bridge, settings.stream, settings.subject_prefix, lines)
        except export.ImportRefused as e:
            print(f"stratus audit import: refused: {e}", file=sys.stderr)
            return EXIT_BROKEN
        finally:
            if source is not sys.stdin.buffer:
                source.close()
    finally:
        bridge.close()
    out.write(f"imported {n} events into {settings.stream}\n")
    return 0
