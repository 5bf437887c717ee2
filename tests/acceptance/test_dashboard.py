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

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.deployed import Cloud, wait_for
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
