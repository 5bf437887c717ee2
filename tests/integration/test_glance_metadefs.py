"""Glance's metadata definitions (``/image/v2/metadefs``) as tempest and Horizon use them: namespaces,
their objects, properties, tags and resource type associations, Glance's policy and its 409s,
against the real JetStream, PostgreSQL and projector.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.api import ADMIN, P1, P2, Stack

NS = "/image/v2/metadefs/namespaces"


def create(stack: Stack, name: str, who: str = ADMIN, **fields: Any) -> Any:
    body = {
        "namespace": name,
        "visibility": "public",
        "description": "Tempest",
        "display_name": name,
        **fields,
    }
    r = stack.request("POST", NS, who, json=body)
    assert r.status_code == 201, r.text
    return r


def listed(stack: Stack, who: str, after: Any, query: str = "") -> list[str]:
    r = stack.get(f"{NS}{query}", who, after=int(after))
    assert r.status_code == 200, r.text
    return [n["namespace"] for n in r.json["namespaces"]]


def test_namespace_lifecycle_as_tempest_drives_it(stack: Stack) -> None:
    types = stack.get("/image/v2/metadefs/resource_types", ADMIN).json["resource_types"]
    assert {"OS::Glance::Image", "OS::Nova::Flavor"} <= {t["name"] for t in types}
    assert set(types[0]) == {"name", "created_at", "updated_at"}
    r = create(stack, "ns-life", protected=True, resource_type_associations=[{"name": "OS::Glance::Image"}])
    body = r.json
    assert body["self"] == "/v2/metadefs/namespaces/ns-life"
    assert body["schema"] == "/v2/schemas/metadefs/namespace"
    assert body["protected"] is True and body["visibility"] == "public" and body["owner"]
    assert body["resource_type_associations"][0]["name"] == "OS::Glance::Image"
    assert "ns-life" in listed(stack, ADMIN, r.headers["X-Stratus-Position"])
    assert "ns-life" in listed(stack, P2, r.headers["X-Stratus-Position"])  # public: everyone's
    shown = stack.get(f"{NS}/ns-life", P1).json
    assert shown["namespace"] == "ns-life" and shown["description"] == "Tempest"
    assert shown["created_at"].endswith("Z")
    r = stack.request("DELETE", f"{NS}/ns-life", ADMIN)
    assert r.status_code == 403, r.text  # protected
    r = stack.request(
        "PUT",
        f"{NS}/ns-life",
        ADMIN,
        json={"namespace": "ns-life", "visibility": "private", "protected": False},
    )
    assert r.status_code == 200, r.text
    assert r.json["visibility"] == "private" and r.json["protected"] is False
    assert "resource_type_associations" not in r.json
    assert stack.get(f"{NS}/ns-life", P2).status_code == 404  # another project's private namespace
    assert "ns-life" not in listed(stack, P2, r.headers["X-Stratus-Position"])
    assert stack.request("DELETE", f"{NS}/ns-life", ADMIN).status_code == 204
    assert stack.get(f"{NS}/ns-life", ADMIN).status_code == 404
    create(stack, "ns-life")  # the name is free again


def test_names_are_unique_and_only_an_admin_writes(stack: Stack) -> None:
    create(stack, "ns-uniq")
    r = stack.request("POST", NS, ADMIN, json={"namespace": "ns-uniq"})
    assert r.status_code == 409, r.text
    assert stack.request("POST", NS, P1, json={"namespace": "ns-mine"}).status_code == 403
    assert stack.request("DELETE", f"{NS}/ns-uniq", P1).status_code == 403
    assert stack.request("POST", f"{NS}/ns-uniq/tags/t", P1).status_code == 403
    assert stack.request("DELETE", f"{NS}/nope", P1).status_code == 404
    r = stack.request("POST", NS, ADMIN, json={"namespace": "x", "created_at": "now"})
    assert r.status_code == 403  # Glance: "Attribute 'created_at' is read-only."
    r = stack.request("POST", NS, ADMIN, json={"namespace": "x", "visibility": "shared"})
    assert r.status_code == 400, r.text
    r = stack.request("POST", NS, ADMIN, json={"display_name": "no name"})
    assert r.status_code == 400, r.text


def test_rename_keeps_the_content_and_frees_the_old_name(stack: Stack) -> None:
    create(stack, "ns-old", tags=[{"name": "a"}], objects=[{"name": "o"}])
    r = stack.request("PUT", f"{NS}/ns-old", ADMIN, json={"namespace": "ns-new", "visibility": "public"})
    assert r.status_code == 200, r.text
    assert r.json["self"] == "/v2/metadefs/namespaces/ns-new"
    assert stack.get(f"{NS}/ns-old", ADMIN).status_code == 404
    shown = stack.get(f"{NS}/ns-new", ADMIN).json
    assert shown["tags"] == [{"name": "a"}] and shown["objects"][0]["name"] == "o"
    create(stack, "ns-taken")
    r = stack.request("PUT", f"{NS}/ns-new", ADMIN, json={"namespace": "ns-taken"})
    assert r.status_code == 409, r.text


def test_objects(stack: Stack) -> None:
    create(stack, "ns-obj")
    prop = {"type": "string", "title": "Speed"}
    r = stack.request(
        "POST", f"{NS}/ns-obj/objects", ADMIN, json={"name": "o1", "properties": {"speed": prop}}
    )
    assert r.status_code == 201, r.text
    assert r.json["self"] == "/v2/metadefs/namespaces/ns-obj/objects/o1"
    assert r.json["schema"] == "/v2/schemas/metadefs/object"
    assert r.json["properties"] == {"speed": prop} and r.json["required"] == []
    assert stack.request("POST", f"{NS}/ns-obj/objects", ADMIN, json={"name": "o1"}).status_code == 409
    r = stack.request("PUT", f"{NS}/ns-obj/objects/o1", ADMIN, json={"name": "o2", "description": "d"})
    assert r.status_code == 200 and r.json["name"] == "o2" and r.json["description"] == "d"
    assert stack.get(f"{NS}/ns-obj/objects/o1", ADMIN).status_code == 404
    assert stack.get(f"{NS}/ns-obj/objects/o2", P2).json["name"] == "o2"
    listing = stack.get(f"{NS}/ns-obj/objects", P1).json
    assert [o["name"] for o in listing["objects"]] == ["o2"] and listing[
        "schema"
    ] == "v2/schemas/metadefs/objects"
    assert stack.request("DELETE", f"{NS}/ns-obj/objects/o2", ADMIN).status_code == 204
    assert stack.get(f"{NS}/ns-obj/objects", ADMIN).json["objects"] == []
    r = stack.request(
        "POST", f"{NS}/ns-obj/objects", ADMIN, json={"name": "o3", "properties": {"x": {"type": "s"}}}
    )
    assert r.status_code == 400, r.text  # a property needs a title, and a type Glance knows


def test_properties_and_resource_type_prefixes(stack: Stack) -> None:
    create(stack, "ns-prop")
    r = stack.request(
        "POST", f"{NS}/ns-prop/resource_types", ADMIN, json={"name": "OS::Nova::Flavor", "prefix": "hw:"}
    )
    assert r.status_code == 201, r.text
    assert r.json["name"] == "OS::Nova::Flavor" and r.json["prefix"] == "hw:" and "created_at" in r.json
    again = stack.request("POST", f"{NS}/ns-prop/resource_types", ADMIN, json={"name": "OS::Nova::Flavor"})
    assert again.status_code == 409
    enum = ["kvm", "qemu"]
    body = {"name": "cpu_policy", "title": "CPU", "type": "string", "enum": enum}
    r = stack.request("POST", f"{NS}/ns-prop/properties", ADMIN, json=body)
    assert r.status_code == 201 and r.json == body
    assert stack.request("POST", f"{NS}/ns-prop/properties", ADMIN, json=body).status_code == 409
    assert stack.get(f"{NS}/ns-prop/properties/cpu_policy", P2).json == body
    prefixed = stack.get(f"{NS}/ns-prop/properties/hw:cpu_policy?resource_type=OS::Nova::Flavor", P2)
    assert prefixed.status_code == 200 and prefixed.json["name"] == "cpu_policy"
    shown = stack.get(f"{NS}/ns-prop?resource_type=OS::Nova::Flavor", P2).json
    assert list(shown["properties"]) == ["hw:cpu_policy"]
    r = stack.request("PUT", f"{NS}/ns-prop/properties/cpu_policy", ADMIN, json={**body, "title": "CPU2"})
    assert r.status_code == 200 and r.json["title"] == "CPU2"
    props = stack.get(f"{NS}/ns-prop/properties", ADMIN).json["properties"]
    assert props["cpu_policy"]["title"] == "CPU2" and "name" not in props["cpu_policy"]
    assert stack.request("DELETE", f"{NS}/ns-prop/properties/cpu_policy", ADMIN).status_code == 204
    assert stack.get(f"{NS}/ns-prop/properties", ADMIN).json == {"properties": {}}
    r = stack.request("DELETE", f"{NS}/ns-prop/resource_types/OS::Nova::Flavor", ADMIN)
    assert r.status_code == 204
    assoc = stack.get(f"{NS}/ns-prop/resource_types", ADMIN).json
    assert assoc == {"resource_type_associations": []}
    # a new resource type joins Glance's list for good
    r = stack.request("POST", f"{NS}/ns-prop/resource_types", ADMIN, json={"name": "OS::Stratus::Thing"})
    types = stack.get("/image/v2/metadefs/resource_types", ADMIN, after=int(r.headers["X-Stratus-Position"]))
    assert "OS::Stratus::Thing" in [t["name"] for t in types.json["resource_types"]]
    listed_ns = stack.get(f"{NS}?resource_types=OS::Stratus::Thing", ADMIN).json["namespaces"]
    assert [n["namespace"] for n in listed_ns] == ["ns-prop"]


def test_tags(stack: Stack) -> None:
    create(stack, "ns-tags", tags=[{"name": "old"}])
    tags = {"tags": [{"name": "sample-tag1"}, {"name": "sample-tag2"}, {"name": "sample-tag3"}]}
    r = stack.request("POST", f"{NS}/ns-tags/tags", ADMIN, json=tags)
    assert r.status_code == 201 and r.json == tags
    names = [t["name"] for t in stack.get(f"{NS}/ns-tags/tags", P1).json["tags"]]
    assert sorted(names) == ["sample-tag1", "sample-tag2", "sample-tag3"]  # replaced "old"
    headers = {**stack.headers(ADMIN), "X-Openstack-Append": "True"}
    r = stack.client.simulate_post(f"{NS}/ns-tags/tags", headers=headers, json={"tags": [{"name": "more"}]})
    assert r.status_code == 201
    assert len(stack.get(f"{NS}/ns-tags/tags", P1).json["tags"]) == 4
    r = stack.client.simulate_post(f"{NS}/ns-tags/tags", headers=headers, json={"tags": [{"name": "MORE"}]})
    assert r.status_code == 409  # names are case insensitive
    r = stack.request("POST", f"{NS}/ns-tags/tags/single", ADMIN)
    assert (
        r.status_code == 201
        and r.json["name"] == "single"
        and set(r.json) == {"name", "created_at", "updated_at"}
    )
    assert stack.request("POST", f"{NS}/ns-tags/tags/single", ADMIN).status_code == 409
    r = stack.request("PUT", f"{NS}/ns-tags/tags/single", ADMIN, json={"name": "renamed"})
    assert r.status_code == 200 and r.json["name"] == "renamed"
    assert stack.get(f"{NS}/ns-tags/tags/renamed", P2).json["name"] == "renamed"
    assert stack.get(f"{NS}/ns-tags/tags/single", P2).status_code == 404
    assert stack.request("DELETE", f"{NS}/ns-tags/tags/renamed", ADMIN).status_code == 204
    assert stack.request("DELETE", f"{NS}/ns-tags/tags", ADMIN).status_code == 204
    assert stack.get(f"{NS}/ns-tags/tags", ADMIN).json == {"tags": []}
    r = stack.request("POST", f"{NS}/ns-tags/tags", ADMIN, json={"tags": [{"name": "a", "x": 1}]})
    assert r.status_code == 400


def test_namespace_list_pages_and_filters(stack: Stack) -> None:
    for i in range(3):
        r = create(stack, f"ns-page-{i}", visibility="private" if i == 1 else "public")
    at = r.headers["X-Stratus-Position"]
    first = stack.get(f"{NS}?limit=2&sort_key=namespace&sort_dir=asc", ADMIN, after=int(at)).json
    names = [n["namespace"] for n in first["namespaces"]]
    assert len(names) == 2 and names == sorted(names)
    assert first["first"] == "/v2/metadefs/namespaces?limit=2&sort_key=namespace&sort_dir=asc"
    assert "marker=" in first["next"] and first["schema"] == "/v2/schemas/metadefs/namespaces"
    assert "ns-page-1" not in listed(stack, ADMIN, at, "?visibility=public")
    assert stack.get(f"{NS}?visibility=shared", ADMIN).status_code == 400
    assert stack.get(f"{NS}?sort_dir=up", ADMIN).status_code == 400
    assert stack.get(f"{NS}?marker=nope", ADMIN).status_code == 404


@pytest.mark.parametrize("path", ["objects", "properties", "tags"])
def test_a_protected_namespace_keeps_its_content(stack: Stack, path: str) -> None:
    create(stack, f"ns-keep-{path}", protected=True)
    assert stack.request("DELETE", f"{NS}/ns-keep-{path}/{path}", ADMIN).status_code == 403
