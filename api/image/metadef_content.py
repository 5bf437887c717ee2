"""``/image/v2/metadefs/namespaces/{namespace}/objects``, ``.../properties`` and ``.../tags``: what a
metadata definitions namespace defines, as Glance serves it.

Each is read from the namespace's aggregate (``commands.metadef``) and changed by one domain call
on it (``ChangeNamespace``); an admin writes, whoever sees the namespace reads (``api.image.metadefs``).
"""

from __future__ import annotations

from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api.body import refuse_unstorable
from api.errors import BadRequest, ItemNotFound
from api.image.metadefs import (
    _Metadefs,
    object_fields,
    object_view,
    property_schema,
    read_body,
    storable_param,
    time,
    validator,
)
from api.readmodel import ReadModel
from commands.bus import MessageBus
from commands.metadef import OBJECTS, PROPERTIES, TAGS, MetadefNamespace
from commands.metadefs.namespaces import ChangeNamespace

_READ_ONLY = ("self", "schema", "created_at", "updated_at")
_TIMES = ("created_at", "updated_at")
_TAGS = Draft202012Validator({"name": "tags"})  # a list of tags is checked by ``_tags_body``
_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})  # oslo's bool_from_string


def _clear(namespace: str, kind: str) -> ChangeNamespace:
    return ChangeNamespace(namespace, lambda n: n.clear(kind))


class ObjectCollection(_Metadefs):
    """``GET``/``POST``/``DELETE .../metadefs/namespaces/{ns}/objects``."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        super().__init__(metadefs, read, max_body_bytes)
        self._schema = validator("object")

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        ns = self._namespace(req, namespace)
        newest = sorted(ns.objects.items(), key=lambda item: item[1].created_at, reverse=True)
        resp.media = {
            "objects": [object_view(ns.namespace, n, o) for n, o in newest],
            "schema": "v2/schemas/metadefs/objects",
        }

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "add_metadef_object")
        obj = object_fields(read_body(req, self._max_body, self._schema, _READ_ONLY))
        ns = self._change(req, resp, ChangeNamespace(namespace, lambda n: n.add_object(**obj)))
        resp.status = falcon.HTTP_201
        resp.media = object_view(ns.namespace, obj["name"], ns.get_object(obj["name"]))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "delete_metadef_namespace")
        self._change(req, resp, _clear(namespace, OBJECTS))
        resp.status = falcon.HTTP_204


class ObjectItem(_Metadefs):
    """``GET``/``PUT``/``DELETE .../metadefs/namespaces/{ns}/objects/{name}``."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        super().__init__(metadefs, read, max_body_bytes)
        self._schema = validator("object")

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str, object_name: str) -> None:
        ns = self._namespace(req, namespace)
        resp.media = object_view(ns.namespace, object_name, ns.get_object(object_name))

    def on_put(self, req: falcon.Request, resp: falcon.Response, namespace: str, object_name: str) -> None:
        self._writable(req, namespace, "modify_metadef_object")
        obj = object_fields(read_body(req, self._max_body, self._schema, _READ_ONLY))
        new_name = obj.pop("name")
        ns = self._change(
            req, resp, ChangeNamespace(namespace, lambda n: n.update_object(object_name, new_name, **obj))
        )
        resp.media = object_view(ns.namespace, new_name, ns.get_object(new_name))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, namespace: str, object_name: str) -> None:
        self._writable(req, namespace, "delete_metadef_object")
        self._change(req, resp, ChangeNamespace(namespace, lambda n: n.remove_object(object_name)))
        resp.status = falcon.HTTP_204


def property_view(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, **schema}


class PropertyCollection(_Metadefs):
    """``GET``/``POST``/``DELETE .../metadefs/namespaces/{ns}/properties``."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        super().__init__(metadefs, read, max_body_bytes)
        self._schema = validator("property")

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        resp.media = {"properties": self._namespace(req, namespace).properties}

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "add_metadef_property")
        body = read_body(req, self._max_body, self._schema, _TIMES)
        name, schema = body["name"], property_schema(body)
        ns = self._change(req, resp, ChangeNamespace(namespace, lambda n: n.add_property(name, schema)))
        resp.status = falcon.HTTP_201
        resp.media = property_view(name, ns.get_property(name))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "delete_metadef_namespace")
        self._change(req, resp, _clear(namespace, PROPERTIES))
        resp.status = falcon.HTTP_204


class PropertyItem(_Metadefs):
    """``GET``/``PUT``/``DELETE .../metadefs/namespaces/{ns}/properties/{name}``."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        super().__init__(metadefs, read, max_body_bytes)
        self._schema = validator("property")

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str, property_name: str) -> None:
        ns = self._namespace(req, namespace)
        resource_type = req.get_param("resource_type")
        name = property_name
        if resource_type:
            prefix = _prefix(ns, resource_type)
            if not prefix or not property_name.startswith(prefix):
                raise ItemNotFound(
                    f"Property {property_name[:80]} does not start with the expected resource type"
                    f" association prefix of '{prefix}'."
                )
            name = property_name[len(prefix) :]
        resp.media = property_view(name, ns.get_property(name))

    def on_put(self, req: falcon.Request, resp: falcon.Response, namespace: str, property_name: str) -> None:
        self._writable(req, namespace, "modify_metadef_property")
        body = read_body(req, self._max_body, self._schema, _TIMES)
        new_name, schema = body["name"], property_schema(body)
        ns = self._change(
            req,
            resp,
            ChangeNamespace(namespace, lambda n: n.update_property(property_name, new_name, schema)),
        )
        resp.media = property_view(new_name, ns.get_property(new_name))

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, namespace: str, property_name: str
    ) -> None:
        self._writable(req, namespace, "remove_metadef_property")
        self._change(req, resp, ChangeNamespace(namespace, lambda n: n.remove_property(property_name)))
        resp.status = falcon.HTTP_204


def _prefix(ns: MetadefNamespace, resource_type: str) -> str | None:
    association = ns.associations.get(resource_type)
    if association is None:
        raise ItemNotFound(
            f"The metadata definition resource-type association of resource-type={resource_type[:80]} to"
            f" namespace={ns.namespace}, was not found."
        )
    return association.prefix


def tag_view(name: str, ns: MetadefNamespace) -> dict[str, Any]:
    tag = ns.get_tag(name)
    return {"name": name, "created_at": time(tag.created_at), "updated_at": time(tag.updated_at)}


def _tags_body(doc: Any) -> list[str]:
    """Glance's ``tags`` list schema: ``{"tags": [{"name": "..."}, ...]}``, nothing else in an item."""
    if not isinstance(doc, dict) or not isinstance(doc.get("tags", []), list):
        raise BadRequest("Provided object does not match schema 'tags': tags must be an array.")
    names = []
    for item in doc.get("tags", []):
        if not isinstance(item, dict) or set(item) != {"name"} or not isinstance(item["name"], str):
            raise BadRequest("Provided object does not match schema 'tags': each tag is {\"name\": string}.")
        if len(item["name"]) > 80:
            raise BadRequest(
                "Provided object does not match schema 'tag': name is longer than 80 characters."
            )
        names.append(item["name"])
    return names


class TagCollection(_Metadefs):
    """``GET``/``POST``/``DELETE .../metadefs/namespaces/{ns}/tags``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        ns = self._namespace(req, namespace)
        sort_dir = req.get_param("sort_dir") or "desc"
        if sort_dir not in ("asc", "desc"):
            raise BadRequest(f"Invalid sort direction: {sort_dir[:64]}")
        tags = sorted(
            ns.tags.items(), key=lambda item: (item[1].created_at, item[0]), reverse=sort_dir == "desc"
        )
        names = [n for n, _ in tags]
        marker = storable_param(req, "marker")
        if marker:
            ns.get_tag(marker)
            names = names[names.index(marker) + 1 :]
        limit = req.get_param_as_int("limit", min_value=0)
        resp.media = {"tags": [{"name": n} for n in (names if limit is None else names[:limit])]}

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "add_metadef_tags")
        names = _tags_body(read_body(req, self._max_body, _TAGS, _TIMES))
        append = (req.get_header("X-Openstack-Append") or "").strip().lower() in _TRUE
        self._change(req, resp, ChangeNamespace(namespace, lambda n: n.add_tags(names, replacing=not append)))
        resp.status = falcon.HTTP_201
        resp.media = {"tags": [{"name": n} for n in names]}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "delete_metadef_tags")
        self._change(req, resp, _clear(namespace, TAGS))
        resp.status = falcon.HTTP_204


class TagItem(_Metadefs):
    """``GET``/``POST``/``PUT``/``DELETE .../metadefs/namespaces/{ns}/tags/{name}``."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        super().__init__(metadefs, read, max_body_bytes)
        self._schema = validator("tag")

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str, tag_name: str) -> None:
        resp.media = tag_view(tag_name, self._namespace(req, namespace))

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str, tag_name: str) -> None:
        self._writable(req, namespace, "add_metadef_tag")
        if len(tag_name) > 80:
            raise BadRequest(
                "Provided object does not match schema 'tag': name is longer than 80 characters."
            )
        refuse_unstorable({"name": tag_name})
        ns = self._change(
            req, resp, ChangeNamespace(namespace, lambda n: n.add_tags([tag_name], replacing=False))
        )
        resp.status = falcon.HTTP_201
        resp.media = tag_view(tag_name, ns)

    def on_put(self, req: falcon.Request, resp: falcon.Response, namespace: str, tag_name: str) -> None:
        self._writable(req, namespace, "modify_metadef_tag")
        new_name = read_body(req, self._max_body, self._schema, _TIMES)["name"]
        ns = self._change(req, resp, ChangeNamespace(namespace, lambda n: n.rename_tag(tag_name, new_name)))
        resp.media = tag_view(new_name, ns)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, namespace: str, tag_name: str) -> None:
        self._writable(req, namespace, "delete_metadef_tag")
        self._change(req, resp, ChangeNamespace(namespace, lambda n: n.remove_tag(tag_name)))
        resp.status = falcon.HTTP_204
