"""A bench's HTTP/1.1 client over one kept-alive socket: the request's bytes out, the response's in.

``http.client`` parses each response's headers with the standard library's e-mail parser; on these
two cores that costs the bench's process more CPU per request than the API's lists spend on some
pages, and the CPU it takes is taken from the server measured beside it. This client sends a
prebuilt request and reads the status line, ``Content-Length`` and the body: the least any client
does to receive an answer. It speaks only what gunicorn answers here (a length, no chunks).
"""

from __future__ import annotations

import socket
from collections.abc import Callable


class ServerClosed(ConnectionError):
    """The server closed the kept-alive connection (gunicorn's keep-alive ran out): connect again."""


class RawHttp:
    """GETs to ``127.0.0.1:port`` over one kept-alive connection, opened again when the server closed it."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.address = (host, port)
        self.host = f"{host}:{port}".encode()
        self.sock: socket.socket | None = None
        self.buffer = b""

    def get(self, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
        """The status and body of ``GET path``."""
        request = b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (
            path.encode(),
            self.host,
            b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in headers.items()),
        )
        for attempt in (1, 2):
            try:
                return self._exchange(request)
            except (ServerClosed, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _exchange(self, request: bytes) -> tuple[int, bytes]:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=60)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.buffer = b""
        self.sock.sendall(request)
        end = self._fill(lambda: self.buffer.find(b"\r\n\r\n"))
        head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length, close = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        self._fill(lambda: 0 if len(self.buffer) >= length else -1)
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        if close:
            self.close()
        return status, body

    def _fill(self, found: Callable[[], int]) -> int:
        assert self.sock is not None
        while (at := found()) < 0:
            chunk = self.sock.recv(1 << 18)
            if not chunk:
                raise ServerClosed("the server closed the connection")
            self.buffer += chunk
        return at

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
