"""``/image/v2/metadefs/namespaces`` and ``/image/v2/metadefs/resource_types``: Glance's metadata
definitions, with its URLs, bodies, status codes and default policy.

An admin defines namespaces (and their content, ``api.image.metadef_content``); everyone reads public
ones, a project its own private ones, and what a project may not see answers 404. A namespace and
what it holds are read from the log (``commands.metadef``), so a write is seen at once; the lists
of namespaces and of resource types read the read model (``projections.metadefs``). Request bodies
are checked against Glance's own schemas (``schemas/glance/metadefs.*.json``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import falcon
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from api import auth
from api.body import read_document, unstorable
from api.errors import BadRequest, Forbidden, ItemNotFound
from api.image.schemas import glance_document
from api.readmodel import POSITION_HEADER, ReadModel
from commands.bus import MessageBus
from commands.metadef import MetadefNamespace, MetadefObject
from commands.metadefs.namespaces import ChangeNamespace, CreateNamespace, DeleteNamespace, UpdateNamespace
from commands.metadefs.namespaces import namespace as namespace_named
from commands.unit_of_work import Result
from projections import metadef_queries
from projections.queries import MarkerNotFound
from stratus.context import Actor, acting

API = "/v2"
ROOT = f"{API}/metadefs/namespaces"
DEFAULT_LIMIT = 25  # Glance's limit_param_default
MAX_LIMIT = 1000  # Glance's api_limit_max
# A namespace list waits for the last namespace write, whoever made it (public ones are everyone's).
EVERYONES = "metadefs:everyone"
_READ_ONLY = ("self", "schema", "created_at", "updated_at")
_TIMES = ("created_at", "updated_at")


def time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scope(actor: Actor) -> str | None:
    """The project whose view applies (None: an admin, who sees every namespace)."""
    return None if auth.is_admin(actor) else actor.project_id


def validator(name: str) -> Draft202012Validator:
    """Glance's schema ``metadefs.<name>``, checked as Glance checks it (formats unchecked)."""
    return Draft202012Validator(glance_document(f"metadefs.{name}.json"))


def read_body(
    req: falcon.Request, max_bytes: int, schema: Draft202012Validator, read_only: tuple[str, ...]
) -> Any:
    """The request's document, as Glance's deserializers take it: read-only keys are 403, anything
    else off its schema 400."""
    doc = read_document(req, max_bytes)
    if doc is None:
        raise BadRequest("Body expected in request.")
    if isinstance(doc, dict):
        for key in read_only:
            if key in doc:
                raise Forbidden(f"Attribute '{key}' is read-only.")
    error = best_match(schema.iter_errors(doc))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "body"
        raise BadRequest(
            f"Provided object does not match schema '{schema.schema.get('name')}':"
            f" {where}: {error.message[:400]}"
        )
    return doc


def storable_param(req: falcon.Request, name: str) -> str | None:
    value = req.get_param(name)
    if value is not None and unstorable(value):
        raise BadRequest(f"Invalid {name}: {unstorable(value)}.")
    return value


def association_view(
    name: str, prefix: str | None, target: str | None, created: str, updated: str
) -> dict[str, Any]:
    view: dict[str, Any] = {"name": name}
    if prefix is not None:
        view["prefix"] = prefix
    if target is not None:
        view["properties_target"] = target
    return {**view, "created_at": created, "updated_at": updated}


def object_view(namespace: str, name: str, obj: MetadefObject) -> dict[str, Any]:
    view: dict[str, Any] = {"name": name, "required": list(obj.required)}
    if obj.description is not None:
        view["description"] = obj.description
    return {
        **view,
        "properties": obj.properties,
        "created_at": time(obj.created_at),
        "updated_at": time(obj.updated_at),
        "self": f"{ROOT}/{namespace}/objects/{name}",
        "schema": f"{API}/schemas/metadefs/object",
    }


def _base_view(fields: dict[str, Any]) -> dict[str, Any]:
    """A namespace's own fields as Glance shows them (absent ones left out)."""
    view = {k: fields[k] for k in ("namespace", "display_name", "description") if fields[k] is not None}
    view.update(
        {
            "visibility": fields["visibility"],
            "protected": fields["protected"],
            "owner": fields["owner"],
            "created_at": fields["created_at"],
            "updated_at": fields["updated_at"],
        }
    )
    return view


def _links(view: dict[str, Any]) -> dict[str, Any]:
    return {**view, "self": f"{ROOT}/{view['namespace']}", "schema": f"{API}/schemas/metadefs/namespace"}


def namespace_view(ns: MetadefNamespace, *, content: bool = True) -> dict[str, Any]:
    """Glance's namespace; ``content``: with what it defines (its show), only what it has."""
    fields = {key: getattr(ns, key) for key in ("namespace", "display_name", "description", "visibility")}
    view = _base_view(
        {**fields, "protected": ns.protected, "owner": ns.owner,
         "created_at": time(ns.created_on), "updated_at": time(ns.fields_updated_at)}
    )  # fmt: skip
    if not content:
        return _links(view)
    if ns.associations:
        view["resource_type_associations"] = [
            association_view(n, a.prefix, a.properties_target, time(a.created_at), time(a.updated_at))
            for n, a in ns.associations.items()
        ]
    if ns.properties:
        view["properties"] = ns.properties
    if ns.objects:
        view["objects"] = [object_view(ns.namespace, n, o) for n, o in ns.objects.items()]
    if ns.tags:
        view["tags"] = [{"name": n} for n in ns.tags]
    return _links(view)


def row_view(row: dict[str, Any]) -> dict[str, Any]:
    view = _base_view({**row, "created_at": time(row["created_at"]), "updated_at": time(row["updated_at"])})
    if row["resource_type_associations"]:
        view["resource_type_associations"] = [
            association_view(a["name"], a["prefix"], a["properties_target"], a["created_at"], a["updated_at"])
            for a in row["resource_type_associations"]
        ]
    return _links(view)


class _Metadefs:
    """What every metadefs resource shares: the bus, the read model, and how a write answers."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        self._metadefs = metadefs
        self._read = read
        self._max_body = max_body_bytes

    def _namespace(self, req: falcon.Request, name: str) -> MetadefNamespace:
        return namespace_named(self._metadefs.uow, name, scope(req.context.actor))

    def _writable(self, req: falcon.Request, name: str, action: str) -> MetadefNamespace:
        """The namespace an admin may change: 404 for what the caller cannot see, 403 otherwise."""
        namespace = self._namespace(req, name)
        _require_admin(req, action)
        return namespace

    def _change(self, req: falcon.Request, resp: falcon.Response, cmd: ChangeNamespace) -> MetadefNamespace:
        with acting(req.context.command):
            result = self._metadefs.handle(cmd)
        return self._written(resp, result)

    def _written(self, resp: falcon.Response, result: Result) -> MetadefNamespace:
        self._read.note(EVERYONES, result.position)
        resp.set_header(POSITION_HEADER, str(result.position))
        return namespace_named(self._metadefs.uow, result.id, None)


def _require_admin(req: falcon.Request, action: str) -> None:
    if not auth.is_admin(req.context.actor):
        raise Forbidden(f"You are not authorized to complete {action} action.")


class NamespaceCollection(_Metadefs):
    """``GET``/``POST /image/v2/metadefs/namespaces``."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        super().__init__(metadefs, read, max_body_bytes)
        self._schema = validator("namespace")

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        limit = _limit(req)
        sort_key = req.get_param("sort_key") or "created_at"
        sort_dir = req.get_param("sort_dir") or "desc"
        if sort_dir not in ("asc", "desc"):
            raise BadRequest(f"Invalid sort direction: {sort_dir[:64]}")
        if sort_key not in metadef_queries.SORT_KEYS:
            raise BadRequest(f"Invalid sort key: {sort_key[:64]}")
        visibility = req.get_param("visibility")
        if visibility and visibility not in ("public", "private"):
            raise BadRequest(f"Invalid visibility value: {visibility[:64]}")
        types = storable_param(req, "resource_types")
        marker = storable_param(req, "marker")
        with self._read.connection(req, concerning=(EVERYONES,)) as conn:
            try:
                rows = metadef_queries.list_namespaces(
                    conn,
                    project_id=scope(req.context.actor),
                    limit=limit,
                    marker=marker,
                    visibility=visibility or None,
                    resource_types=tuple(t for t in (types or "").split(",") if t),
                    sort_key=sort_key,
                    sort_dir=sort_dir,
                )
            except MarkerNotFound:
                raise ItemNotFound(f"Metadata definition namespace={marker} was not found.") from None
        params = {k: v for k, v in req.params.items() if k != "marker"}
        query = urlencode(params, doseq=True)
        body: dict[str, Any] = {
            "namespaces": [row_view(r) for r in rows],
            "first": f"{ROOT}?{query}" if query else ROOT,
            "schema": f"{API}/schemas/metadefs/namespaces",
        }
        if rows and len(rows) == limit:
            body["next"] = f"{ROOT}?{urlencode({**params, 'marker': rows[-1]['namespace']}, doseq=True)}"
        resp.media = body

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _require_admin(req, "add_metadef_namespace")
        body = read_body(req, self._max_body, self._schema, _READ_ONLY)
        command = _create_command(body, req.context.actor.project_id)
        with acting(req.context.command):
            result = self._metadefs.handle(command)
        namespace = self._written(resp, result)
        resp.status = falcon.HTTP_201
        resp.location = f"{req.prefix}/image{ROOT}/{namespace.namespace}"
        resp.media = namespace_view(namespace)


# What Glance's models take of each item given (wsme refuses any other attribute).
PROPERTY_KEYS = frozenset({
    "name", "type", "title", "description", "operators", "default", "readonly", "minimum", "maximum", "enum",
    "pattern", "minLength", "maxLength", "confidential", "items", "uniqueItems", "minItems", "maxItems",
    "additionalItems", "required",
})  # fmt: skip
OBJECT_KEYS = ("name", "description", "required", "properties")
ASSOCIATION_KEYS = ("name", "prefix", "properties_target")


def _only(item: Any, keys: Any, what: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise BadRequest(f"Invalid {what}: an object is expected.")
    unknown = sorted(k for k in item if k not in keys)
    if unknown:
        raise BadRequest(f"Unknown attribute for argument {what}: {unknown[0][:80]}")
    return item


def property_schema(value: Any) -> dict[str, Any]:
    """A property definition as stored: its attributes but its name (Glance's ``PropertyType``)."""
    prop = _only(value, PROPERTY_KEYS, "property")
    if not isinstance(prop.get("title"), str) or "type" not in prop:
        raise BadRequest("Mandatory field missing: a property needs a title and a type.")
    return {k: v for k, v in prop.items() if k != "name"}


def object_fields(value: Any) -> dict[str, Any]:
    """An object's definition, its properties checked as Glance's models check them."""
    obj = _only(value, OBJECT_KEYS, "object")
    if not isinstance(obj.get("name"), str):
        raise BadRequest("Mandatory field missing: an object needs a name.")
    return {
        "name": obj["name"],
        "description": obj.get("description"),
        "required": list(obj.get("required") or ()),
        "properties": {k: property_schema(v) for k, v in (obj.get("properties") or {}).items()},
    }


def _create_command(body: dict[str, Any], owner: str) -> CreateNamespace:
    fields = {k: body.get(k) for k in ("namespace", "display_name", "description", "visibility", "protected")}
    associations = [
        _only(a, ASSOCIATION_KEYS, "resource_type_associations")
        for a in body.get("resource_type_associations") or ()
    ]
    tags = [_only(t, ("name",), "tags") for t in body.get("tags") or ()]
    if any(not isinstance(x.get("name"), str) for x in (*associations, *tags)):
        raise BadRequest("Mandatory field missing: every tag and resource type association needs a name.")
    return CreateNamespace(
        {**fields, "owner": body.get("owner") or owner},
        objects=[object_fields(o) for o in body.get("objects") or ()],
        properties={k: property_schema(v) for k, v in (body.get("properties") or {}).items()},
        tags=[t["name"] for t in tags],
        associations=[{k: a.get(k) for k in ASSOCIATION_KEYS} for a in associations],
    )


def _limit(req: falcon.Request) -> int:
    raw = req.get_param("limit")
    if raw is None:
        return DEFAULT_LIMIT
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest("limit param must be an integer") from None
    if value < 0:
        raise BadRequest("limit param must be positive")
    return min(MAX_LIMIT, value)


class NamespaceItem(_Metadefs):
    """``GET``/``PUT``/``DELETE /image/v2/metadefs/namespaces/{ns}``."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        super().__init__(metadefs, read, max_body_bytes)
        self._schema = validator("namespace")

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        ns = self._namespace(req, namespace)
        view = namespace_view(ns)
        resource_type = req.get_param("resource_type")
        if resource_type and resource_type in ns.associations:
            view = _prefixed(view, ns.associations[resource_type].prefix)
        resp.media = view

    def on_put(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "modify_metadef_namespace")
        body = read_body(req, self._max_body, self._schema, _READ_ONLY)
        fields = {
            k: body.get(k) for k in ("namespace", "display_name", "description", "visibility", "protected")
        }
        fields["owner"] = body.get("owner") or req.context.actor.project_id
        with acting(req.context.command):
            result = self._metadefs.handle(UpdateNamespace(namespace, fields))
        resp.media = namespace_view(self._written(resp, result), content=False)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "delete_metadef_namespace")
        with acting(req.context.command):
            result = self._metadefs.handle(DeleteNamespace(namespace))
        self._read.note(EVERYONES, result.position)
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.status = falcon.HTTP_204


def _prefixed(view: dict[str, Any], prefix: str | None) -> dict[str, Any]:
    """Glance's show with ``resource_type``: property names as that resource type spells them."""
    if not prefix:
        return view
    if "properties" in view:
        view["properties"] = {prefix + k: v for k, v in view["properties"].items()}
    for obj in view.get("objects", ()):
        obj["properties"] = {prefix + k: v for k, v in obj["properties"].items()}
        obj["required"] = [prefix + name for name in obj["required"]]
    return view


class ResourceTypes:
    """``GET /metadefs/resource_types``: every resource type a namespace may be associated with."""

    def __init__(self, read: ReadModel) -> None:
        self._read = read

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req, concerning=(EVERYONES,)) as conn:
            rows = metadef_queries.list_resource_types(conn)
        resp.media = {
            "resource_types": [
                {"name": r["name"], "created_at": time(r["created_at"]), "updated_at": time(r["updated_at"])}
                for r in rows
            ]
        }


class AssociationCollection(_Metadefs):
    """``/metadefs/namespaces/{namespace}/resource_types``: what the namespace applies to."""

    def __init__(self, metadefs: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        super().__init__(metadefs, read, max_body_bytes)
        self._schema = validator("resource_type")

    def on_get(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        ns = self._namespace(req, namespace)
        resp.media = {
            "resource_type_associations": [
                association_view(n, a.prefix, a.properties_target, time(a.created_at), time(a.updated_at))
                for n, a in ns.associations.items()
            ]
        }

    def on_post(self, req: falcon.Request, resp: falcon.Response, namespace: str) -> None:
        self._writable(req, namespace, "add_metadef_resource_type_association")
        body = read_body(req, self._max_body, self._schema, _TIMES)
        name, prefix, target = body["name"], body.get("prefix"), body.get("properties_target")
        ns = self._change(req, resp, ChangeNamespace(namespace, lambda n: n.associate(name, prefix, target)))
        a = ns.get_association(name)
        resp.status = falcon.HTTP_201
        resp.media = association_view(
            name, a.prefix, a.properties_target, time(a.created_at), time(a.updated_at)
        )


class AssociationItem(_Metadefs):
    """``DELETE /image/v2/metadefs/namespaces/{ns}/resource_types/{type}``."""

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, namespace: str, resource_type: str
    ) -> None:
        self._writable(req, namespace, "remove_metadef_resource_type_association")
        self._change(req, resp, ChangeNamespace(namespace, lambda n: n.dissociate(resource_type)))
        resp.status = falcon.HTTP_204
