"""Acceptance: the dashboard in a real browser (headless Chromium, ``tests/fixtures/browser.py``)
against a whole Stratus: the API, the projector, the scheduler, a hypervisor on libvirt's test
driver and ``stratus watch`` (the event stream), each a process.

The pages are checked as a user sees them, without reloading: a server made through the form
appears and goes ACTIVE, one made with the CLI appears and disappears, a stop is followed to
SHUTOFF, the timeline lists the log's events with actor and request id, and the time slider shows
the server as it was. A member's page lacks the admin pages and data. Screenshots are saved
(``screenshots`` fixture); ``docs/dashboard.png`` is the servers page of the first test.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stratus.eventstore.subjects import encode_token
from tests.fixtures.deployed import HOST, Cloud, wait_for
from tests.fixtures.identity import ADMIN_PASSWORD

pytestmark = pytest.mark.slow

WAIT_MS = 60_000
_ROW = "#servers tr:has(a:text-is('{name}'))"


def _prepare(cloud: Cloud) -> None:
    cloud.openstack("flavor", "create", "--ram", "256", "--disk", "1", "--vcpus", "1", "tiny")
    cloud.openstack(
        "image", "create", "--file", str(cloud.image_file), "--disk-format", "raw",
        "--container-format", "bare", "--public", "img",
    )  # fmt: skip
    wait_for("the hypervisor", lambda: cloud.openstack("hypervisor", "list"))


def _sign_in(page: Any, cloud: Cloud, user: str, password: str, project: str) -> None:
    page.goto(f"{cloud.base}/dashboard")
    page.fill("#signin input[name=user]", user)
    page.fill("#signin input[name=password]", password)
    page.fill("#signin input[name=project]", project)
    page.click("#signin button[type=submit]")
    page.wait_for_selector("#servers")
    # the event stream is open: the page shows the log position it is at
    page.wait_for_selector("#position.live[data-position]:not([data-position=''])", timeout=WAIT_MS)


def _row(page: Any, name: str, status: str = "") -> Any:
    """The row of server ``name`` once it shows ``status`` (any status: "")."""
    which = f"[data-status={status}]" if status else ""
    return page.wait_for_selector(_ROW.format(name=name) + which, timeout=WAIT_MS)


def test_a_server_from_the_form_to_its_timeline(dashboard_cloud: Cloud, page: Any, screenshots: Path) -> None:
    cloud = dashboard_cloud
    _prepare(cloud)
    _sign_in(page, cloud, "admin", ADMIN_PASSWORD, "admin")
    page.evaluate("window.stillTheSamePage = true")  # gone if anything reloads the page
    started_at = int(page.get_attribute("#position", "data-position"))

    # the form offers the flavor and the image; the server is followed to ACTIVE, on its host
    page.wait_for_selector("#create select[name=flavor] option:text-matches('tiny')", state="attached")
    page.wait_for_selector("#create select[name=image] option:text-is('img')", state="attached")
    page.fill("#create input[name=name]", "web-1")
    page.click("#create button[type=submit]")
    _row(page, "web-1")
    row = _row(page, "web-1", "ACTIVE")
    assert "cli-compute" in row.inner_text()  # the host, for an admin
    assert "Host" in page.inner_text("#servers thead")
    assert int(page.get_attribute("#position", "data-position")) > started_at
    page.screenshot(path=str(screenshots / "servers.png"))

    # a server made with the CLI appears, goes ACTIVE, and disappears when deleted
    cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "cli-1")
    _row(page, "cli-1", "ACTIVE")
    cloud.openstack_quiet("server", "delete", "cli-1")
    page.wait_for_selector("#servers tr:has(a:text-is('cli-1'))", state="detached", timeout=WAIT_MS)

    # stopped from its row, followed to SHUTOFF; only the actions SHUTOFF allows are offered
    # (rows are redrawn as events arrive: each step finds its row afresh)
    _row(page, "web-1", "ACTIVE")
    page.click(f"{_ROW.format(name='web-1')} button[data-action=stop]")
    row = _row(page, "web-1", "SHUTOFF")
    assert [b.inner_text() for b in row.query_selector_all("button")] == ["start", "delete"]

    # its timeline: every event with actor and request id, the stop among them
    page.click(f"{_ROW.format(name='web-1')} a")
    page.wait_for_selector("#timeline tbody tr >> nth=3", timeout=WAIT_MS)
    page.wait_for_selector("#timeline td:text-matches('stop')", timeout=WAIT_MS)
    first = page.query_selector("#timeline tbody tr")
    cells = [c.inner_text() for c in first.query_selector_all("td")]
    assert cells[2] == "requested" and "admin" in cells[3] and cells[4].startswith("req-")
    assert page.inner_text("[data-field=Status]") == "SHUTOFF"

    # the time slider: at the first event the server was being built, at the last it is stopped
    page.wait_for_selector("#past:text-matches('shutoff|SHUTOFF|stopped')", timeout=WAIT_MS)
    page.eval_on_selector("#slider", "s => { s.value = 0; s.dispatchEvent(new Event('input')); }")
    position = cells[0]
    page.wait_for_selector(f"#slider-position:text-matches('position {position} ')")
    page.wait_for_selector("#timeline tr.current-position >> nth=0")
    assert page.get_attribute("#timeline tr.current-position", "data-position") == position
    page.wait_for_function("() => !/shutoff|stopped/i.test(document.getElementById('past').textContent)")
    # what the first event changed: everything was new (nothing before it)
    page.wait_for_selector("#diff td:text-is('name')")
    # and the stop's last event: the server's state went from active to stopped
    last = len(page.query_selector_all("#timeline tbody tr")) - 1
    page.eval_on_selector("#slider", f"s => {{ s.value = {last}; s.dispatchEvent(new Event('input')); }}")
    changed = page.wait_for_selector("#diff tr:has(td:text-is('vm_state'))").inner_text()
    assert "active" in changed and "stopped" in changed, changed
    page.screenshot(path=str(screenshots / "timeline.png"), full_page=True)
    assert page.evaluate("window.stillTheSamePage") is True


def test_a_members_view_lacks_admin_pages_and_data(
    dashboard_cloud: Cloud, page: Any, screenshots: Path
) -> None:
    cloud = dashboard_cloud
    _prepare(cloud)
    cloud.openstack("project", "create", "web")
    cloud.openstack("user", "create", "--password", "alice-pw", "--project", "web", "alice")
    cloud.openstack_quiet("role", "add", "--project", "web", "--user", "alice", "member")
    cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "admins-vm")

    _sign_in(page, cloud, "alice", "alice-pw", "web")
    page.fill("#create input[name=name]", "alices-vm")
    page.click("#create button[type=submit]")
    _row(page, "alices-vm", "ACTIVE")
    nav = page.inner_text("#nav")
    assert "Servers" in nav and "Hosts" not in nav and "All servers" not in nav
    assert "Host" not in page.inner_text("#servers thead")
    assert "admins-vm" not in page.inner_text("#servers")
    assert "cli-compute" not in page.inner_text("#servers")
    page.screenshot(path=str(screenshots / "member.png"))

    page.goto(f"{cloud.base}/dashboard#/admin/hosts")
    page.wait_for_selector("h1:text-is('Not available')")
    assert page.query_selector("#hosts") is None

    # switching projects follows her roles: a reader in "ops" sees its servers and cannot act
    cloud.openstack("project", "create", "ops")
    cloud.openstack_quiet("role", "add", "--project", "ops", "--user", "alice", "reader")
    cloud.openstack_quiet("role", "add", "--project", "ops", "--user", "admin", "member")
    in_ops = cloud.env(project="ops")
    cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "ops-vm", env=in_ops)
    page.goto(f"{cloud.base}/dashboard#/servers")
    page.reload()  # still signed in (the tab's session), with the projects listed afresh
    page.wait_for_selector("#project option:text-is('ops')", state="attached")
    page.select_option("#project", label="ops")
    page.wait_for_selector("h1:text-matches('Servers of ops')")
    _row(page, "ops-vm", "ACTIVE")
    assert page.query_selector("#create") is None
    assert page.query_selector("#servers button") is None
    assert "alices-vm" not in page.inner_text("#servers")


# -- the admin and auditor pages (aggregates.js, placement.js, migrations.js, services.js, usage.js,
# audit.js, charts.js) ----------------------------------------------------------------------------
_ADMIN_PAGES = ("aggregates", "placement", "migrations", "services", "usage")


def _open(page: Any, cloud: Cloud, where: str) -> None:
    """Go to a page by its address, as a click on the header's link does (no reload)."""
    page.evaluate(f"location.hash = '{where}'")


def _slide(page: Any, slider: str, value: int) -> None:
    page.eval_on_selector(slider, f"s => {{ s.value = {value}; s.dispatchEvent(new Event('input')); }}")


def test_an_admin_uses_the_admin_pages_audit_and_charts(
    dashboard_cloud: Cloud, page: Any, screenshots: Path
) -> None:
    cloud = dashboard_cloud
    _prepare(cloud)
    cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "vm-1")
    cloud.openstack("aggregate", "create", "--zone", "zone-a", "rack-1")
    cloud.openstack_quiet("aggregate", "add", "host", "rack-1", "cli-compute")
    # a cold migration with no other host to go to: recorded, then failed (Nova's "error")
    vm_1 = cloud.openstack("server", "show", "vm-1")["id"]
    cloud.openstack_quiet("server", "migrate", "vm-1")

    def migration_over() -> bool:
        shown = cloud.openstack("server", "show", "vm-1")
        return bool(shown["status"] == "ACTIVE" and not shown["OS-EXT-STS:task_state"])

    wait_for("the migration's end", migration_over, timeout=60)
    _sign_in(page, cloud, "admin", ADMIN_PASSWORD, "admin")
    page.evaluate("window.stillTheSamePage = true")
    nav = page.inner_text("#nav")
    assert all(
        label in nav
        for label in ("Aggregates", "Placement", "Migrations", "Services", "Usage", "Audit", "Charts")
    )

    _open(page, cloud, "#/admin/aggregates")
    row = page.wait_for_selector("#aggregates tr:has(td:text-is('rack-1'))", timeout=WAIT_MS).inner_text()
    assert "zone-a" in row and "cli-compute" in row
    page.wait_for_selector(
        "#zones tr:has(td:text-is('zone-a')):has(td:text-is('cli-compute'))", timeout=WAIT_MS
    )
    page.screenshot(path=str(screenshots / "admin-aggregates.png"), full_page=True)

    # Placement: the host's provider, its inventory and what vm-1 (1 vCPU, 256 MB) uses of it
    _open(page, cloud, "#/admin/placement")
    vcpu = page.wait_for_selector(
        "#providers tr[data-provider=cli-compute][data-class=VCPU]", timeout=WAIT_MS
    )
    assert vcpu.query_selector_all("td")[5].inner_text().startswith("1 / ")
    ram = page.wait_for_selector("#providers tr[data-provider=cli-compute][data-class=MEMORY_MB]")
    assert ram.query_selector_all("td")[5].inner_text().startswith("256 / ")
    page.screenshot(path=str(screenshots / "admin-placement.png"), full_page=True)

    _open(page, cloud, "#/admin/migrations")
    row = page.wait_for_selector(f"#migrations tr:has(a:text-is('{vm_1}'))", timeout=WAIT_MS)
    cells = [c.inner_text() for c in row.query_selector_all("td")]
    assert cells[1:4] == ["migration", "error", "cli-compute"], cells
    page.screenshot(path=str(screenshots / "admin-migrations.png"), full_page=True)

    # services: disable the compute host with a reason, see it, and the CLI agrees; enable it again
    _open(page, cloud, "#/admin/services")
    compute = "#services tr[data-host=cli-compute][data-binary=nova-compute]"
    page.wait_for_selector(f"{compute}[data-status=enabled]", timeout=WAIT_MS)
    page.fill(f"{compute} input[name=reason]", "new disks")
    page.click(f"{compute} button[data-action=disable]")
    row = page.wait_for_selector(f"{compute}[data-status=disabled]", timeout=WAIT_MS).inner_text()
    assert "new disks" in row
    listed = cloud.openstack("compute", "service", "list", "--service", "nova-compute", "--long")
    assert [(s["Status"], s["Disabled Reason"]) for s in listed if s["Host"] == "cli-compute"] == [
        ("disabled", "new disks")
    ]
    page.screenshot(path=str(screenshots / "admin-services.png"), full_page=True)

    # hosts: the same host disabled with its reason, vm-1's vCPU against the total and its ratio
    _open(page, cloud, "#/admin/hosts")
    host = page.wait_for_selector(
        "#hosts tr[data-host=cli-compute]:has(td:text-is('new disks'))", timeout=WAIT_MS
    )
    cells = [c.inner_text() for c in host.query_selector_all("td")]
    assert cells[1:4] == ["up", "disabled", "new disks"], cells
    assert re.fullmatch(r"1 / \d+ \u00d7 \d+(\.\d+)?", cells[4]), cells
    assert re.fullmatch(r"256 / \d+ \u00d7 \d+(\.\d+)?", cells[5]), cells
    page.screenshot(path=str(screenshots / "admin-hosts.png"), full_page=True)

    _open(page, cloud, "#/admin/services")
    page.click(f"{compute} button[data-action=enable]")
    page.wait_for_selector(f"{compute}[data-status=enabled]", timeout=WAIT_MS)
    # the admin pages follow the stream: a change made with the CLI shows without a reload
    cloud.openstack_quiet(
        "compute",
        "service",
        "set",
        "--disable",
        "--disable-reason",
        "by the cli",
        "cli-compute",
        "nova-compute",
    )
    row = page.wait_for_selector(f"{compute}[data-status=disabled]", timeout=WAIT_MS).inner_text()
    assert "by the cli" in row
    cloud.openstack_quiet("compute", "service", "set", "--enable", "cli-compute", "nova-compute")
    page.wait_for_selector(f"{compute}[data-status=enabled]", timeout=WAIT_MS)
    _open(page, cloud, "#/admin/aggregates")
    page.wait_for_selector("#aggregates tr:has(td:text-is('rack-1'))", timeout=WAIT_MS)
    cloud.openstack("aggregate", "create", "--zone", "zone-b", "rack-2")
    page.wait_for_selector(
        "#aggregates tr:has(td:text-is('rack-2')):has(td:text-is('zone-b'))", timeout=WAIT_MS
    )

    _open(page, cloud, "#/admin/usage")
    usage = page.wait_for_selector("#usage tr:has(td:text-is('admin'))", timeout=WAIT_MS)
    assert usage.query_selector_all("td")[1].inner_text() == "1"  # vm-1
    page.screenshot(path=str(screenshots / "admin-usage.png"), full_page=True)

    # the audit page: the chain verified, an anchor to record; the cloud's capacity as it was
    _open(page, cloud, "#/audit")
    page.wait_for_selector("#chain[data-ok=true]", timeout=WAIT_MS)
    anchor = page.inner_text("#chain [data-field=anchor]")
    assert anchor.split(":")[0].isdigit() and len(anchor.split(":")[1]) == 64
    page.wait_for_selector("#capacity-slider-at [data-field=hosts]:text-is('1')", timeout=WAIT_MS)
    assert page.inner_text("#capacity-slider-at [data-field=servers]") == "1"
    _slide(page, "#capacity-slider", 1)  # before any host registered
    page.wait_for_selector(
        "#capacity-slider-at[data-position='1'] [data-field=hosts]:text-is('0')", timeout=WAIT_MS
    )
    page.screenshot(path=str(screenshots / "audit-admin.png"), full_page=True)

    # charts from the log: usage and capacity over positions, one boot counted
    _open(page, cloud, "#/charts")
    page.wait_for_selector("#boots-chart[data-boots='1'] canvas", timeout=WAIT_MS)
    page.wait_for_selector("#usage-chart canvas", timeout=WAIT_MS)
    page.wait_for_selector("#vcpu-chart canvas", timeout=WAIT_MS)
    page.wait_for_selector("#ram-chart canvas", timeout=WAIT_MS)
    assert int(page.get_attribute("#vcpu-chart", "data-points")) > 1
    # a boot made now is counted live
    cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "vm-2")
    page.wait_for_selector("#boots-chart[data-boots='2']", timeout=WAIT_MS)
    page.screenshot(path=str(screenshots / "charts.png"), full_page=True)
    assert page.evaluate("window.stillTheSamePage") is True


def test_a_reader_slides_her_projects_usage_and_gets_no_admin_data(
    dashboard_cloud: Cloud, page: Any, screenshots: Path
) -> None:
    cloud = dashboard_cloud
    _prepare(cloud)
    cloud.openstack("project", "create", "web")
    cloud.openstack("user", "create", "--password", "rita-pw", "--project", "web", "rita")
    cloud.openstack_quiet("role", "add", "--project", "web", "--user", "rita", "reader")
    cloud.openstack_quiet("role", "add", "--project", "web", "--user", "admin", "member")
    in_web = cloud.env(project="web")
    cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "web-vm", env=in_web)

    asked: list[str] = []
    page.on("request", lambda r: None if "/dashboard" in r.url else asked.append(r.url))  # the API's only
    _sign_in(page, cloud, "rita", "rita-pw", "web")
    nav = page.inner_text("#nav")
    assert "Audit" in nav and "Charts" in nav and "Services" not in nav and "Placement" not in nav
    for name in _ADMIN_PAGES:
        _open(page, cloud, f"#/admin/{name}")
        page.wait_for_selector("h1:text-is('Not available')")
        assert page.query_selector("table") is None
    admin_apis = ("os-aggregates", "os-availability-zone", "/placement", "os-migrations", "os-services",
                  "os-simple-tenant-usage", "os-hypervisors", "/audit/verify")  # fmt: skip
    assert not [u for u in asked if any(a in u for a in admin_apis)]
    page.screenshot(path=str(screenshots / "reader-not-available.png"))

    # the audit page: no chain (auditors only), her project's usage at any position of the log
    _open(page, cloud, "#/audit")
    page.wait_for_selector("#usage-slider-at [data-field=instances]:text-is('1')", timeout=WAIT_MS)
    assert page.query_selector("#chain") is None and page.query_selector("#capacity-slider") is None
    _slide(page, "#usage-slider", 1)
    page.wait_for_selector(
        "#usage-slider-at[data-position='1'] [data-field=instances]:text-is('0')", timeout=WAIT_MS
    )
    head = int(page.get_attribute("#usage-slider", "max"))
    _slide(page, "#usage-slider", head)
    page.wait_for_selector(
        f"#usage-slider-at[data-position='{head}'] [data-field=ram]:text-is('256')", timeout=WAIT_MS
    )
    page.screenshot(path=str(screenshots / "audit-reader.png"), full_page=True)
    assert not [u for u in asked if any(a in u for a in admin_apis)]


def _public_key(tmp: Path) -> str:
    """A fresh OpenSSH public key (ssh-keygen's), to import."""
    key = tmp / "imported"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    return (tmp / "imported.pub").read_text().strip()


def _in_use(page: Any, resource: str) -> int:
    return int(page.get_attribute(f"#quotas tr[data-key={resource}]", "data-in-use"))


def test_the_project_views_followed_live(
    dashboard_cloud: Cloud, page: Any, screenshots: Path, tmp_path: Path
) -> None:
    """Flavors, key pairs, images, server groups and quotas as an admin: each form's write appears
    in its list without a reload, and so does what the CLI does meanwhile."""
    cloud = dashboard_cloud
    _prepare(cloud)
    _sign_in(page, cloud, "admin", ADMIN_PASSWORD, "admin")
    page.evaluate("window.stillTheSamePage = true")

    # flavors: the sizes listed; one created through the form, one by the CLI, one deleted
    page.click("#nav a:text-is('Flavors')")
    row = page.wait_for_selector("#flavors tr[data-name=tiny]", timeout=WAIT_MS)
    assert [c.inner_text() for c in row.query_selector_all("td")][:4] == ["tiny", "1", "256", "1"]
    page.fill("#flavor-create input[name=name]", "small")
    page.fill("#flavor-create input[name=vcpus]", "2")
    page.fill("#flavor-create input[name=ram]", "1024")
    page.click("#flavor-create button[type=submit]")
    page.wait_for_selector("#flavors tr[data-name=small] td:text-is('1024')", timeout=WAIT_MS)
    assert any(f["Name"] == "small" for f in cloud.openstack("flavor", "list"))
    cloud.openstack("flavor", "create", "--ram", "2048", "--disk", "2", "--vcpus", "2", "medium")
    page.wait_for_selector("#flavors tr[data-name=medium]", timeout=WAIT_MS)
    page.click("#flavors tr[data-name=small] button[data-action=delete]")
    page.wait_for_selector("#flavors tr[data-name=small]", state="detached", timeout=WAIT_MS)
    page.screenshot(path=str(screenshots / "flavors.png"))

    # key pairs: a created one's private key shown once; an imported one; a deletion
    page.click("#nav a:text-is('Key pairs')")
    page.wait_for_selector("#keypairs")
    page.fill("#keypair-create input[name=name]", "made-here")
    page.click("#keypair-create button[type=submit]")
    secret = page.wait_for_selector("#private-key pre", timeout=WAIT_MS).inner_text()
    assert "PRIVATE KEY" in secret
    page.wait_for_selector("#keypairs tr[data-key=made-here]", timeout=WAIT_MS)
    assert page.get_attribute("#private-key a", "download") == "made-here.pem"
    page.screenshot(path=str(screenshots / "keypairs.png"))
    page.click("#private-key button:text-is('Done')")
    assert page.query_selector("#private-key") is None
    public = _public_key(tmp_path)
    page.fill("#keypair-import input[name=name]", "imported")
    page.fill("#keypair-import textarea[name=public_key]", public)
    page.click("#keypair-import button[type=submit]")
    page.wait_for_selector("#keypairs tr[data-key=imported]", timeout=WAIT_MS)
    assert cloud.openstack("keypair", "show", "imported")["fingerprint"] in page.inner_text("#keypairs")
    page.click("#keypairs tr[data-key=made-here] button[data-action=delete]")
    page.wait_for_selector("#keypairs tr[data-key=made-here]", state="detached", timeout=WAIT_MS)

    # images: a file uploaded through the form with its progress, active, then deleted
    page.click("#nav a:text-is('Images')")
    page.wait_for_selector("#images tr[data-name=img][data-status=active]", timeout=WAIT_MS)
    data = bytes(range(256)) * (4 * 4096)  # 4 MiB
    page.fill("#image-upload input[name=name]", "uploaded")
    page.set_input_files(
        "#image-upload input[name=file]",
        files=[{"name": "disk.raw", "mimeType": "application/octet-stream", "buffer": data}],
    )
    page.click("#image-upload button[type=submit]")
    page.wait_for_selector("#images tr[data-name=uploaded][data-status=active]", timeout=WAIT_MS)
    page.wait_for_selector("#upload-percent:text-matches('^100 % of 4.0 MiB')")
    assert page.evaluate("document.getElementById('upload-progress').value") == len(data)
    shown = cloud.openstack("image", "show", "uploaded")
    assert shown["size"] == len(data) and shown["status"] == "active"
    page.screenshot(path=str(screenshots / "images.png"))
    page.click("#images tr[data-name=uploaded] button[data-action=delete]")
    page.wait_for_selector("#images tr[data-name=uploaded]", state="detached", timeout=WAIT_MS)

    # server groups: one created through the form; a server booted into it joins its members
    page.click("#nav a:text-is('Server groups')")
    page.wait_for_selector("#groups")
    page.fill("#group-create input[name=name]", "spread")
    page.select_option("#group-create select[name=policy]", "anti-affinity")
    page.click("#group-create button[type=submit]")
    row = page.wait_for_selector("#groups tr[data-name=spread]", timeout=WAIT_MS)
    assert "anti-affinity" in row.inner_text()
    group = row.get_attribute("data-key")
    # (with Nova's os:scheduler_hints: the openstack CLI's --hint sends OS-SCH-HNT:scheduler_hints)
    flavor = cloud.openstack("flavor", "show", "tiny")["id"]
    image = cloud.openstack("image", "show", "img")["id"]
    server = {"name": "in-group", "flavorRef": flavor, "imageRef": image}
    hints = {"os:scheduler_hints": {"group": group}}
    answer = cloud.sdk().compute.post("/servers", json={"server": server, **hints})
    assert answer.status_code == 202, answer.text
    page.wait_for_selector("#groups tr[data-name=spread] td.members[data-count='1']", timeout=WAIT_MS)
    page.screenshot(path=str(screenshots / "groups.png"))

    # quotas: the bars follow a server created meanwhile (instances, vCPUs and RAM in use)
    page.click("#nav a:text-is('Quotas')")
    page.wait_for_selector("#quotas tr[data-key=instances] meter", timeout=WAIT_MS)
    before = {r: _in_use(page, r) for r in ("instances", "cores", "ram")}
    assert before["instances"] >= 1
    assert int(page.get_attribute("#quotas tr[data-key=instances]", "data-limit")) > 0
    cloud.openstack("server", "create", "--flavor", "medium", "--image", "img", "quota-1")
    page.wait_for_function(
        "n => Number(document.querySelector('#quotas tr[data-key=instances]').dataset.inUse) === n",
        arg=before["instances"] + 1,
        timeout=WAIT_MS,
    )
    page.wait_for_function(
        "n => Number(document.querySelector('#quotas tr[data-key=ram]').dataset.inUse) === n",
        arg=before["ram"] + 2048,
        timeout=WAIT_MS,
    )
    assert _in_use(page, "cores") == before["cores"] + 2
    page.screenshot(path=str(screenshots / "quotas.png"))
    assert page.evaluate("window.stillTheSamePage") is True


def test_a_member_and_a_reader_get_no_controls_they_cannot_use(dashboard_cloud: Cloud, page: Any) -> None:
    """A member: no flavor form or deletes, no delete on another project's image, her own project's
    quotas only; a reader: no upload or group form, but her own key pairs (Nova lets any role)."""
    cloud = dashboard_cloud
    _prepare(cloud)
    cloud.openstack("project", "create", "web")
    cloud.openstack("user", "create", "--password", "alice-pw", "--project", "web", "alice")
    cloud.openstack_quiet("role", "add", "--project", "web", "--user", "alice", "member")
    cloud.openstack("project", "create", "ops")
    cloud.openstack_quiet("role", "add", "--project", "ops", "--user", "alice", "reader")
    admin_project = cloud.openstack("project", "show", "admin")["id"]

    _sign_in(page, cloud, "alice", "alice-pw", "web")
    page.goto(f"{cloud.base}/dashboard#/flavors")
    page.wait_for_selector("#flavors tr[data-name=tiny]", timeout=WAIT_MS)
    assert page.query_selector("#flavor-create") is None
    assert page.query_selector("#flavors button") is None
    assert "Actions" not in page.inner_text("#flavors thead")

    page.click("#nav a:text-is('Images')")
    page.wait_for_selector("#images tr[data-name=img]", timeout=WAIT_MS)
    assert page.query_selector("#image-upload") is not None
    assert page.query_selector("#images tr[data-name=img] button") is None  # the admin project's
    assert "public" not in page.inner_text("#image-upload select[name=visibility]")

    page.click("#nav a:text-is('Quotas')")
    page.wait_for_selector("#quotas tr[data-key=instances]", timeout=WAIT_MS)
    assert page.query_selector("#quota-project") is None
    page.goto(f"{cloud.base}/dashboard#/quotas/{admin_project}")
    page.wait_for_selector("main .error", timeout=WAIT_MS)  # the API's 403, shown as it is
    assert not page.query_selector_all("#quotas tbody tr")

    # in "ops", where she is a reader (the page stays on the view it was on)
    page.click("#nav a:text-is('Server groups')")
    page.wait_for_selector("#group-create")
    page.wait_for_selector("#project option:text-is('ops')", state="attached")
    page.select_option("#project", label="ops")
    page.wait_for_function("() => document.querySelector('#who').textContent.includes('reader')")
    # the view is drawn again for the new project: the member's form goes, and no reader's comes
    page.wait_for_selector("#group-create", state="detached", timeout=WAIT_MS)
    page.wait_for_selector("#groups")
    assert page.query_selector("#group-create") is None
    page.click("#nav a:text-is('Images')")
    page.wait_for_selector("#images tr[data-name=img]", timeout=WAIT_MS)
    assert page.query_selector("#image-upload") is None
    page.click("#nav a:text-is('Key pairs')")
    page.wait_for_selector("#keypair-create")
    page.fill("#keypair-create input[name=name]", "readers-own")
    page.click("#keypair-create button[type=submit]")
    page.wait_for_selector("#keypairs tr[data-key=readers-own]", timeout=WAIT_MS)


def test_the_servers_list_a_page_at_a_time(dashboard_cloud: Cloud, page: Any, screenshots: Path) -> None:
    """55 servers at 50 a page: the first page's 50, Next to the last 5 (no Next then), Previous back
    to the same 50, the rows' positions shown; the page size is the user's choice."""
    cloud = dashboard_cloud
    _prepare(cloud)
    cloud.openstack_quiet("quota", "set", "--instances", "100", "--cores", "100", "--ram", "102400", "admin")
    flavor = cloud.openstack("flavor", "show", "tiny")["id"]
    image = cloud.openstack("image", "show", "img")["id"]
    server = {"name": "many", "flavorRef": flavor, "imageRef": image, "min_count": 55}
    answer = cloud.sdk().compute.post("/servers", json={"server": server})  # one request, 55 servers
    assert answer.status_code == 202, answer.text
    held: list[Any] = []  # the first read of the list (100 a page), held until the user has moved on
    first_read = re.compile(r"/v2\.1/servers/detail\?limit=100(&|$)")
    page.route(first_read, lambda route: route.continue_() if held else held.append(route))
    _sign_in(page, cloud, "admin", ADMIN_PASSWORD, "admin")
    wait_for("the first read of the list", lambda: page.wait_for_timeout(100) or held)
    rows = "n => document.querySelectorAll('#servers tbody tr').length === n"
    page.select_option("#page-size", "50")
    page.wait_for_function(rows, arg=50, timeout=WAIT_MS)
    page.wait_for_selector("#count:text-is('1\u201350')")  # an en dash
    with page.expect_response(first_read) as late:
        held[0].continue_()
    late.value.finished()
    page.evaluate("() => new Promise((done) => setTimeout(done, 200))")  # its answer is read, or ignored
    assert page.eval_on_selector_all("#servers tbody tr", "rows => rows.length") == 50  # not the late 55
    assert not page.is_disabled("#next")
    first = [r.get_attribute("data-id") for r in page.query_selector_all("#servers tbody tr")]

    page.click("#next")
    page.wait_for_selector("#pager[data-page='2']", timeout=WAIT_MS)
    page.wait_for_function(rows, arg=5, timeout=WAIT_MS)
    page.wait_for_selector("#count:text-is('51\u201355, the last')")
    assert page.is_disabled("#next") and not page.is_disabled("#previous")
    second = [r.get_attribute("data-id") for r in page.query_selector_all("#servers tbody tr")]
    assert not set(first) & set(second)
    page.screenshot(path=str(screenshots / "servers-page-2.png"))

    page.click("#previous")
    page.wait_for_selector("#pager[data-page='1']", timeout=WAIT_MS)
    page.wait_for_function(rows, arg=50, timeout=WAIT_MS)
    assert {r.get_attribute("data-id") for r in page.query_selector_all("#servers tbody tr")} == set(first)
    assert page.is_disabled("#previous")
    page.reload()  # the page size is kept in the tab
    page.wait_for_function(rows, arg=50, timeout=WAIT_MS)
    assert page.eval_on_selector("#page-size", "s => s.value") == "50"


def test_the_server_page_shows_its_console_log(dashboard_cloud: Cloud, page: Any, screenshots: Path) -> None:
    """The console log as the API answers it: on the test driver no guest writes one, so first the
    API's "no console" message; then the lines the host reads from the guest's log file, the last 50
    or all of them, read again on "refresh"; a reader (refused by policy) gets no section at all."""
    cloud = dashboard_cloud
    _prepare(cloud)
    server = cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "vm-log")[
        "id"
    ]
    cloud.openstack("user", "create", "--password", "rita-pw", "--project", "admin", "rita")
    cloud.openstack_quiet("role", "add", "--project", "admin", "--user", "rita", "reader")

    _sign_in(page, cloud, "admin", ADMIN_PASSWORD, "admin")
    page.click(f"{_ROW.format(name='vm-log')} a")
    page.wait_for_selector("#console-section[data-state=unavailable]", timeout=WAIT_MS)
    assert page.inner_text("#console-log-note") == "Guest does not have a console available."
    assert page.query_selector("#console-section .error") is None

    # the guest's serial console log, where the host's worker reads it (the test driver writes none)
    log = cloud.logs / "data" / "instances" / encode_token(HOST) / server / "console.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"boot line {i}\n" for i in range(300)))
    page.click("#console-refresh")
    page.wait_for_selector("#console-section[data-state=shown]", timeout=WAIT_MS)
    shown = page.inner_text("#console-log").splitlines()
    assert shown == [f"boot line {i}" for i in range(250, 300)], shown[:3]
    page.select_option("#console-length", label="whole log")
    page.wait_for_function(
        "() => document.getElementById('console-log').textContent.startsWith('boot line 0\\n')"
    )
    assert len(page.inner_text("#console-log").splitlines()) == 300
    page.screenshot(path=str(screenshots / "console-log.png"), full_page=True)

    # a reader: the policy refuses her the console log, so the page offers none
    page.click("#signout")
    _sign_in(page, cloud, "rita", "rita-pw", "admin")
    page.click(f"{_ROW.format(name='vm-log')} a")
    page.wait_for_selector("#timeline tbody tr", timeout=WAIT_MS)
    assert page.query_selector("#console-section") is None


_TIME_LABEL = re.compile(r"^(\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}(:\d{2})?$")


def test_the_charts_run_over_time_with_positions_in_the_legend(
    dashboard_cloud: Cloud, page: Any, screenshots: Path
) -> None:
    """The usage and capacity charts' x axis is the time of each sampled position's event; the
    legend at a point names its time and its log position."""
    cloud = dashboard_cloud
    _prepare(cloud)
    cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "vm-t")
    _sign_in(page, cloud, "admin", ADMIN_PASSWORD, "admin")
    head = int(page.get_attribute("#position", "data-position"))
    _open(page, cloud, "#/charts")
    for chart in ("#usage-chart", "#vcpu-chart", "#ram-chart"):
        page.wait_for_selector(f"{chart}[data-x-labels] canvas", timeout=WAIT_MS)
        labels = json.loads(page.get_attribute(chart, "data-x-labels"))
        assert labels and all(_TIME_LABEL.match(label) for label in labels), labels
        assert int(page.get_attribute(chart, "data-points")) > 2  # the samples' times were all found
    # the legend at the chart's last point: its time and position (the head the page had seen)
    box = page.query_selector("#usage-chart .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 1, box["y"] + box["height"] / 2)
    legend = page.wait_for_selector("#usage-chart .u-legend .u-series:first-child .u-value").inner_text()
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) · position (\d+)", legend)
    assert match and head <= int(match.group(2)), legend
    page.screenshot(path=str(screenshots / "charts-time.png"), full_page=True)

    # a member: her stream shows her project's events only, and her samples fall on them
    cloud.openstack("project", "create", "web")
    cloud.openstack("user", "create", "--password", "alice-pw", "--project", "web", "alice")
    cloud.openstack_quiet("role", "add", "--project", "web", "--user", "alice", "member")
    alice = cloud.env("alice", "alice-pw", "web")
    cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "vm-a", env=alice)
    page.click("#signout")
    _sign_in(page, cloud, "alice", "alice-pw", "web")
    _open(page, cloud, "#/charts")
    page.wait_for_selector("#usage-chart[data-x-labels] canvas", timeout=WAIT_MS)
    labels = json.loads(page.get_attribute("#usage-chart", "data-x-labels"))
    assert labels and all(_TIME_LABEL.match(label) for label in labels), labels
    assert int(page.get_attribute("#usage-chart", "data-points")) > 1
    assert page.query_selector("#vcpu-chart") is None


def test_a_server_created_in_a_group_from_the_form(
    dashboard_cloud: Cloud, page: Any, screenshots: Path
) -> None:
    """The create form offers the project's server groups; the server it makes joins the chosen one
    (the ``group`` scheduler hint): the groups page and the CLI list it among the members."""
    cloud = dashboard_cloud
    _prepare(cloud)
    group = cloud.openstack("server", "group", "create", "--policy", "anti-affinity", "spread")
    _sign_in(page, cloud, "admin", ADMIN_PASSWORD, "admin")
    option = page.wait_for_selector(
        f"#create select[name=group] option[value='{group['id']}']", state="attached", timeout=WAIT_MS
    )
    assert option.inner_text() == "spread (anti-affinity)"
    page.fill("#create input[name=name]", "grouped")
    page.select_option("#create select[name=group]", group["id"])
    page.click("#create button[type=submit]")
    _row(page, "grouped", "ACTIVE")
    server = page.get_attribute(_ROW.format(name="grouped"), "data-id")
    page.screenshot(path=str(screenshots / "create-in-group.png"), full_page=True)

    page.click("#nav a:text-is('Server groups')")
    page.wait_for_selector(f"#groups tr[data-name=spread] a[href='#/servers/{server}']", timeout=WAIT_MS)
    assert server in cloud.openstack("server", "group", "show", "spread")["members"]
