"""A server's hostname derived from its name, as Nova derives it: the API shows it and the metadata
trees give it to the guest (over HTTP and on the config drive), so both take it from here."""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[ _.]")
_OTHERS = re.compile(r"[^\w-]+", flags=re.ASCII)


def hostname_for(name: str) -> str:
    """Nova's ``sanitize_hostname``: lower case, runs of other characters as one dash, at most 63."""
    text = _SEPARATORS.sub("-", name.lower())
    text = _OTHERS.sub("", text).strip("-.")
    return text[:63].rstrip("-") or "server"
