"""One guest's connection to 169.254.169.254, relayed to the metadata service with its identity.

This is what Neutron's metadata agent is to Nova: it knows which server a connection comes from
because it serves only that server, and it signs the server's id with the proxy key, so that the
service can believe it. QEMU's user-mode network runs it once per connection the guest opens to
169.254.169.254:80 (``guestfwd=tcp:169.254.169.254:80-cmd:stratus metadata-proxy ...``), with the
connection on its standard input and output (docs/metadata.md).

The guest's request goes on as it came, but for the headers that name a caller (a guest never
chooses whom it is taken for) and ``Connection`` (one request per connection: closed after it).
"""

from __future__ import annotations

import io
import socket

from api.metadata.caller import signature

MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024  # the largest body the service takes is a password of 1020 bytes
# Headers a guest may not send on: they name a caller, or keep the connection open.
DROPPED = frozenset(
    {"x-instance-id", "x-instance-id-signature", "x-tenant-id", "x-forwarded-for", "connection",
     "keep-alive", "proxy-connection"}
)  # fmt: skip


class BadRequest(Exception):
    """The guest's bytes are not a request this relay passes on."""


def signed_request(raw: bytes, instance_id: str, project_id: str, key: bytes) -> tuple[bytes, int]:
    """The request head ``raw`` (up to its blank line) with the caller's headers replaced by the
    signed ones; and the body's length it announces."""
    lines = raw.split(b"\r\n")
    request_line, fields = lines[0], [line for line in lines[1:] if line]
    if request_line.count(b" ") != 2:
        raise BadRequest("not an HTTP request line")
    kept, length = [], 0
    for field in fields:
        name, colon, value = field.partition(b":")
        if not colon:
            raise BadRequest("a header without a colon")
        lowered = name.strip().lower().decode("latin-1")
        if lowered == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise BadRequest("Content-Length is not a number") from None
        if lowered not in DROPPED:
            kept.append(field)
    if not 0 <= length <= MAX_BODY:
        raise BadRequest("the body is too large")
    ours = [
        b"X-Instance-ID: " + instance_id.encode(),
        b"X-Tenant-ID: " + project_id.encode(),
        b"X-Instance-ID-Signature: " + signature(key, instance_id).encode(),
        b"Connection: close",
    ]
    return b"\r\n".join([request_line, *kept, *ours]) + b"\r\n\r\n", length


def relay(
    guest_in: io.BufferedIOBase,
    guest_out: io.BufferedIOBase,
    service: tuple[str, int],
    instance_id: str,
    project_id: str,
    key: bytes,
    timeout: float = 30.0,
) -> None:
    """Read one request from the guest, send it signed to ``service``, and copy back the answer."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = guest_in.read1(4096)
        if not chunk or len(data) + len(chunk) > MAX_HEAD:
            _refuse(guest_out, b"400 Bad Request")
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        request, length = signed_request(head, instance_id, project_id, key)
    except BadRequest:
        _refuse(guest_out, b"400 Bad Request")
        return
    while len(body) < length:
        chunk = guest_in.read1(4096)
        if not chunk:
            _refuse(guest_out, b"400 Bad Request")
            return
        body += chunk
    answered = False
    try:
        with socket.create_connection(service, timeout=timeout) as upstream:
            upstream.sendall(request + body[:length])
            while answer := upstream.recv(65536):
                guest_out.write(answer)
                guest_out.flush()
                answered = True
    except OSError:
        if not answered:  # else the guest sees a short answer, and the connection closed
            _refuse(guest_out, b"502 Bad Gateway")


def _refuse(guest_out: io.BufferedIOBase, status: bytes) -> None:
    guest_out.write(b"HTTP/1.0 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    guest_out.flush()
