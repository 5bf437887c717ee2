"""The stock ``openstack`` CLI on the operator's side of the Compute API, against the running
processes (gunicorn API, projector, scheduler and a libvirt test-driver hypervisor, from
``tests.fixtures.deployed``): quotas and limits, compute services, host aggregates and availability zones,
server groups, flavor properties and access.
"""

from __future__ import annotations

import socket
from pathlib import Path

import libvirt
import pytest

from stratus.config import Settings
from tests.fixtures.deployed import Http, cli
from tests.fixtures.openstack_forks import OPENSTACK

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(OPENSTACK).exists(), reason="python-openstackclient is not installed"),
]


def test_operator_commands(parts: tuple[Settings, Http], compute: libvirt.virConnect, tmp_path: Path) -> None:
    settings, http = parts

    services = cli(http, tmp_path, "compute", "service", "list", "-f", "json")
    assert [(s["Binary"], s["Host"], s["Status"], s["State"]) for s in services] == [
        ("nova-compute", settings.host_name, "enabled", "up"),
        ("nova-scheduler", socket.gethostname(), "enabled", "up"),  # the scheduler part beats too
    ]
    cli(
        http,
        tmp_path,
        "compute",
        "service",
        "set",
        "--disable",
        "--disable-reason",
        "cli",
        settings.host_name,
        "nova-compute",
    )
    services = cli(http, tmp_path, "compute", "service", "list", "--long", "-f", "json")
    assert (services[0]["Status"], services[0]["Disabled Reason"]) == ("disabled", "cli")
    cli(http, tmp_path, "compute", "service", "set", "--enable", settings.host_name, "nova-compute")

    # `hypervisor show` also asks for the host's uptime and parses `uptime`'s line from it
    hypervisor = cli(http, tmp_path, "hypervisor", "show", settings.host_name, "-f", "json")
    assert (hypervisor["hypervisor_hostname"], hypervisor["service_host"]) == (settings.host_name,) * 2
    assert hypervisor["state"] == "up" and hypervisor["users"] == "0"
    assert len(hypervisor["load_average"].split(", ")) == 3 and hypervisor["uptime"]

    agg = cli(http, tmp_path, "aggregate", "create", "--zone", "az1", "rack1", "-f", "json")
    assert (agg["name"], agg["availability_zone"]) == ("rack1", "az1")
    cli(http, tmp_path, "aggregate", "add", "host", "rack1", settings.host_name)
    zones = cli(http, tmp_path, "availability", "zone", "list", "--compute", "-f", "json")
    # an admin's list is the detailed one: the host's zone and Nova's "internal"; no host is in "nova"
    assert sorted({z["Zone Name"] for z in zones}) == ["az1", "internal"]

    group = cli(http, tmp_path, "server", "group", "create", "--policy", "anti-affinity", "web", "-f", "json")
    assert group["name"] == "web"
    assert "web" in [g["Name"] for g in cli(http, tmp_path, "server", "group", "list", "-f", "json")]

    cli(
        http,
        tmp_path,
        "flavor",
        "create",
        "--private",
        "--ram",
        "128",
        "--vcpus",
        "1",
        "--disk",
        "1",
        "cli.private",
    )
    cli(http, tmp_path, "flavor", "set", "--property", "hw:cpu_policy=dedicated", "cli.private")
    flavor = cli(http, tmp_path, "flavor", "show", "cli.private", "-f", "json")
    assert "hw:cpu_policy" in str(flavor["properties"])

    project = cli(http, tmp_path, "project", "show", "admin", "-f", "json")["id"]
    cli(http, tmp_path, "quota", "set", "--instances", "7", "--cores", "11", project)
    shown = cli(http, tmp_path, "quota", "show", project, "-f", "json")
    # newer clients print rows of {"Resource", "Limit"}, older ones one object
    quota = {r["Resource"]: r["Limit"] for r in shown} if isinstance(shown, list) else shown
    assert (quota["instances"], quota["cores"]) == (7, 11)
    limits = cli(http, tmp_path, "limits", "show", "--absolute", "-f", "json")
    assert {"Name": "instances", "Value": 7} in limits  # the SDK renames maxTotalInstances
