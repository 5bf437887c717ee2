"""The consoles: a guest's serial port and VNC display, reached through a one-use token, as Nova's
remote consoles with nova-consoleauth and its proxies.

The Compute API issues the token (``remote.py``: ``POST /servers/{id}/remote-consoles`` and the
older ``os-getSerialConsole``/``os-getVNCConsole`` actions); ``tokens.py`` keeps only its SHA-256 in
PostgreSQL; ``proxy.py`` is ``stratus serialproxy`` and ``stratus novncproxy``: it checks the
browser's Origin and the token, then relays the websocket to the guest's host over NATS
(``stratus.consolerelay``). See docs/consoles.md.
"""
