"""``queries.page_of_hosts`` (``os-hypervisors`` paged with a limit or a marker) reads the page
``list_hosts`` would give paged in Python, as the list paged it before: a marker is a host's id as
the microversion shows it (``api.services.integer_id`` before 2.53, the UUID's text from it), the
first host by name when two share one, and a marker no host has is not found; and the hosts a
pattern matches (``hosts_matching``) are those the list filtered in Python before."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import pytest

from api.services import integer_id
from projections import queries
from projections.schema import LIVE_SCHEMA

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _host(conn: psycopg.Connection[Any], hostname: str, host_id: UUID) -> None:
    conn.execute(
        f"INSERT INTO {LIVE_SCHEMA}.hosts (id, hostname, hypervisor_type, vcpus, memory_mb, disk_gb, "
        "cpu_allocation_ratio, ram_allocation_ratio, disk_allocation_ratio, created_at, updated_at, "
        "version, position) VALUES (%s, %s, 'QEMU', 1, 1, 1, 1, 1, 1, %s, %s, 1, 1)",
        (host_id, hostname, T0, T0),
    )


def _in_python(hosts: list[Any], limit: int, marker: str, shown: Any) -> list[Any]:
    """The page as the list made it from every host before (``api/hypervisors.py``, 06f6c1e)."""
    ids = [str(shown(h)) for h in hosts]
    if marker not in ids:
        raise queries.MarkerNotFound(marker)
    return hosts[ids.index(marker) + 1 :][:limit]


def test_a_page_of_hosts_is_the_one_paged_from_every_host(rm: psycopg.Connection[Any]) -> None:
    rng = random.Random(16)
    # ids whose first 32 bits are the edges of the integer id (0 and 1 show as 1; the top bit set),
    # two that share an integer id, and random ones
    firsts = [0, 1, 2, 3, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE]
    ids = [UUID(int=(first << 96) | rng.getrandbits(96)) for first in firsts]
    ids += [UUID(int=rng.getrandbits(128)) for _ in range(24)]
    names = [f"h{rng.randrange(10**6):06d}-{n}" for n in range(len(ids))]
    for name, host_id in zip(names, ids, strict=True):
        _host(rm, name, host_id)
    every = queries.list_hosts(rm)
    assert len(every) == len(ids)
    for uuid_ids, shown in ((True, lambda h: h.id), (False, lambda h: integer_id(h.id))):
        markers = [str(shown(h)) for h in every] + ["nope", "0", "00000001", str(ids[0]).upper(), ""]
        for limit in (0, 1, 2, 5, 1000):
            assert queries.page_of_hosts(rm, limit, uuid_ids=uuid_ids) == every[:limit]
            for marker in markers:
                try:
                    expected = _in_python(every, limit, marker, shown)
                except queries.MarkerNotFound:
                    with pytest.raises(queries.MarkerNotFound):
                        queries.page_of_hosts(rm, limit, marker, uuid_ids=uuid_ids)
                    continue
                assert queries.page_of_hosts(rm, limit, marker, uuid_ids=uuid_ids) == expected, marker


def test_the_hosts_matching_a_pattern_are_those_whose_name_contains_it(rm: psycopg.Connection[Any]) -> None:
    """``queries.hosts_matching`` (the hypervisors' ``hypervisor_hostname_pattern``, ``/search``,
    ``/servers``) is the filter made in Python before: ``pattern in hostname``, by hostname."""
    names = ["compute-1", "compute-10", "Compute-2", "gpu_1", "gpu%1", "a.b", "ünï-1", "x" * 40]
    for n, name in enumerate(names):
        _host(rm, name, UUID(int=n + 1))
    every = queries.list_hosts(rm)
    patterns = ["", "compute", "Compute", "-1", "_", "%", "_1", ".", "ünï", "xx", "no", "COMPUTE", "1"]
    for pattern in patterns:
        assert queries.hosts_matching(rm, pattern) == [h for h in every if pattern in h.hostname], pattern


def test_a_host_by_its_integer_id_is_the_first_by_name_that_shows_it(rm: psycopg.Connection[Any]) -> None:
    """``queries.host_by_number`` (a host shown before 2.53 by its integer id) finds what a walk of
    every host did: the first by hostname whose ``integer_id`` is the number, none for the others."""
    firsts = [0, 1, 2, 3, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
    for n, first in enumerate(firsts):
        _host(rm, f"h{len(firsts) - n}", UUID(int=(first << 96) | n))
    every = queries.list_hosts(rm)
    for number in [integer_id(h.id) for h in every] + [0, 4, 2**31, 2**63, 10**30]:
        found = queries.host_by_number(rm, number)
        walked = next((h for h in every if integer_id(h.id) == number), None)
        assert (found and found["hostname"]) == (walked and walked.hostname), number
