"""Acceptance: the stock ``openstack`` CLI on Keystone's directory (domains, groups, roles, the
catalog, application credentials) against a whole Stratus (the ``cloud`` of test_openstack_cli)."""

from __future__ import annotations

import pytest

from tests.fixtures.deployed import Cloud

pytestmark = pytest.mark.slow


def test_keystone_directory_with_the_cli(cloud: Cloud) -> None:
    domain = cloud.openstack("domain", "create", "--description", "engineering", "eng")
    assert domain["name"] == "eng" and domain["enabled"] is True
    cloud.openstack("project", "create", "--domain", "eng", "web")
    cloud.openstack("user", "create", "--domain", "eng", "--password", "eve-pw", "eve")
    group = cloud.openstack("group", "create", "--domain", "eng", "ops")
    cloud.openstack_quiet(
        "group", "add", "user", "--group-domain", "eng", "--user-domain", "eng", "ops", "eve"
    )
    role = cloud.openstack("role", "create", "auditor")
    cloud.openstack_quiet(
        "role", "add", "--group", group["id"], "--project", "web", "--project-domain", "eng", "member"
    )
    assignments = cloud.openstack("role", "assignment", "list", "--group", group["id"], "--names")
    assert [a["Role"] for a in assignments] == ["member"]
    # eve's token carries the role her group holds.
    env = cloud.env("eve", "eve-pw", "web")
    env.update(OS_USER_DOMAIN_NAME="eng", OS_PROJECT_DOMAIN_NAME="eng")
    token = cloud.openstack("token", "issue", env=env)
    assert token["project_id"]
    # The catalog is an API.
    region = cloud.openstack("region", "create", "west")
    assert region["region"] == "west"
    service = cloud.openstack("service", "create", "--name", "cinder", "volumev3")
    cloud.openstack("endpoint", "create", "--region", "west", service["id"], "public", "http://vol:8776/v3")
    listed = cloud.openstack("catalog", "list")
    assert "volumev3" in {s["Type"] for s in listed}
    # Application credentials, made and used by eve.
    made = cloud.openstack("application", "credential", "create", "--role", "member", "ci", env=env)
    assert made["Secret"] and made["Project ID"] == token["project_id"]
    creds = {
        "OS_AUTH_TYPE": "v3applicationcredential",
        "OS_APPLICATION_CREDENTIAL_ID": made["ID"],
        "OS_APPLICATION_CREDENTIAL_SECRET": made["Secret"],
    }
    app_env = {k: v for k, v in env.items() if k not in ("OS_USERNAME", "OS_PASSWORD", "OS_PROJECT_NAME")}
    app_env = {k: v for k, v in app_env.items() if "DOMAIN" not in k}
    assert cloud.openstack("token", "issue", env={**app_env, **creds})["project_id"] == token["project_id"]
    cloud.openstack_quiet("application", "credential", "delete", "ci", env=env)
    cloud.openstack_quiet("role", "delete", role["id"])
    cloud.openstack_quiet("domain", "set", "--disable", "eng")
    cloud.openstack_quiet("domain", "delete", "eng")
    assert "eng" not in {d["Name"] for d in cloud.openstack("domain", "list")}
