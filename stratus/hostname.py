"""A server's hostname derived from its name, as Nova derives it: the API shows it and the metadata
trees give it to the guest (over HTTP and on the config drive), so both take it from here."""

from __future__ import annotations

import re


def hostname_for(name: str) -> str:
    """Nova's ``sanitize_hostname``: lower case, runs of other characters as one dash, at most 63."""
    text = re.sub(r"[ _.]", "-", name.lower())
    text = re.sub(r"[^\w-]+", "", text, flags=re.ASCII).strip("-.")
    return text[:63].rstrip("-") or "server"
