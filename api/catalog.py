"""Routes of what users keep for their servers and of a server's own items, wired in one place.

``add_routes`` adds the image service (``/image``, ``/image/v2/...``), key pairs
(``/v2.1/os-keypairs``) and server metadata and tags (``/v2.1/servers/{id}/metadata``,
``.../tags``) to the app ``create_app`` builds.
"""

from __future__ import annotations

from pathlib import Path

import falcon

from api import (
    image_actions,
    image_members,
    image_schemas,
    image_tasks,
    images,
    keypairs,
    metadef_content,
    metadefs,
    nova_images,
    server_fields,
)
from api.body import load_validators
from api.readmodel import ReadModel
from commands.bus import MessageBus
from commands.handlers import Handlers
from stratus.imagestore import BlobStore, ImageStore

SCHEMAS = ("images.create", "keypairs.create", "servers.metadata", "servers.metadata_item", "servers.tags")


def image_store(data_dir: Path) -> ImageStore:
    return ImageStore(data_dir / "images")


def user_data_store(data_dir: Path) -> BlobStore:
    return BlobStore(data_dir / "user_data")


def add_routes(
    app: falcon.App, handlers: Handlers, bus: MessageBus, read: ReadModel, data_dir: Path, max_body_bytes: int
) -> None:
    validators = load_validators(SCHEMAS)
    image_args = (bus, read, image_store(data_dir), validators, max_body_bytes)
    app.add_route(images.IMAGE_ROOT, images.Versions())
    app.add_route(f"{images.IMAGE_ROOT}/v2/images", images.ImageCollection(*image_args))
    app.add_route(f"{images.IMAGE_ROOT}/v2/images/{{image_id}}", images.ImageItem(*image_args))
    app.add_route(f"{images.IMAGE_ROOT}/v2/images/{{image_id}}/file", images.ImageData(*image_args))
    app.add_route(f"{images.IMAGE_ROOT}/v2/images/{{image_id}}/tags/{{tag}}", image_actions.ImageTag(bus))
    for action in ("deactivate", "reactivate"):
        resource = image_actions.ImageAction(bus, active=action == "reactivate")
        app.add_route(f"{images.IMAGE_ROOT}/v2/images/{{image_id}}/actions/{action}", resource)
    members = f"{images.IMAGE_ROOT}/v2/images/{{image_id}}/members"
    app.add_route(members, image_members.MemberCollection(bus, read, max_body_bytes))
    app.add_route(f"{members}/{{member_id}}", image_members.MemberItem(bus, read, max_body_bytes))
    app.add_route(f"{images.IMAGE_ROOT}/v2/tasks", image_tasks.TaskCollection(bus, read, max_body_bytes))
    app.add_route(f"{images.IMAGE_ROOT}/v2/tasks/{{task_id}}", image_tasks.TaskItem(bus))
    app.add_route(f"{images.IMAGE_ROOT}/v2/schemas/{{name}}", image_schemas.Schema())
    app.add_route(f"{images.IMAGE_ROOT}/v2/info/import", image_schemas.ImportInfo())
    app.add_route(f"{images.IMAGE_ROOT}/v2/schemas/metadefs/{{name}}", image_schemas.MetadefSchema())
    _add_metadefs(app, bus, read, max_body_bytes)
    nova_images.add_routes(app, bus, read, max_body_bytes)

    keypair_args = (bus, read, validators, max_body_bytes)
    app.add_route("/v2.1/os-keypairs", keypairs.KeyPairCollection(*keypair_args))
    app.add_route("/v2.1/os-keypairs/{name}", keypairs.KeyPairItem(*keypair_args))

    field_args = (handlers, validators, max_body_bytes)
    app.add_route("/v2.1/servers/{server_id}/metadata", server_fields.Metadata(*field_args))
    app.add_route("/v2.1/servers/{server_id}/metadata/{key}", server_fields.MetadataItem(*field_args))
    app.add_route("/v2.1/servers/{server_id}/tags", server_fields.Tags(*field_args))
    app.add_route("/v2.1/servers/{server_id}/tags/{tag}", server_fields.Tag(*field_args))


def _add_metadefs(app: falcon.App, bus: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
    """Glance's metadata definitions (``api.metadefs``, ``api.metadef_content``)."""
    args = (bus, read, max_body_bytes)
    root = f"{images.IMAGE_ROOT}/v2/metadefs"
    namespace = f"{root}/namespaces/{{namespace}}"
    app.add_route(f"{root}/resource_types", metadefs.ResourceTypes(read))
    app.add_route(f"{root}/namespaces", metadefs.NamespaceCollection(*args))
    app.add_route(namespace, metadefs.NamespaceItem(*args))
    app.add_route(f"{namespace}/resource_types", metadefs.AssociationCollection(*args))
    app.add_route(f"{namespace}/resource_types/{{resource_type}}", metadefs.AssociationItem(*args))
    app.add_route(f"{namespace}/objects", metadef_content.ObjectCollection(*args))
    app.add_route(f"{namespace}/objects/{{object_name}}", metadef_content.ObjectItem(*args))
    app.add_route(f"{namespace}/properties", metadef_content.PropertyCollection(*args))
    app.add_route(f"{namespace}/properties/{{property_name}}", metadef_content.PropertyItem(*args))
    app.add_route(f"{namespace}/tags", metadef_content.TagCollection(*args))
    app.add_route(f"{namespace}/tags/{{tag_name}}", metadef_content.TagItem(*args))
