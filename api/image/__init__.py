"""``/image``: the image service's subset Stratus serves (Glance v2's URLs and bodies), one module
per resource, as Glance has.

- ``images``: discovery, images and their data; ``patch``: Glance's JSON patch of an image;
- ``actions``: tags, deactivate and reactivate; ``members``: sharing an image with projects;
- ``tasks``: import tasks; ``schemas``: Glance's JSON schemas and import info;
- ``metadefs``: metadata definition namespaces, resource types and their associations;
  ``metadef_content``: a namespace's objects, properties and tags.

Nova's own image API (``/v2.1/images``, a proxy of this one) is ``api/nova_images.py``.
"""

from __future__ import annotations

from typing import Any

import falcon

from api.image import actions, images, members, metadef_content, metadefs, schemas, tasks
from api.readmodel import ReadModel
from commands.bus import MessageBus
from stratus.imagestore import ImageStore

IMAGE_ROOT = images.IMAGE_ROOT


def add_routes(
    app: falcon.App,
    bus: MessageBus,
    read: ReadModel,
    store: ImageStore,
    validators: dict[str, Any],
    max_body_bytes: int,
) -> None:
    """Mount Glance's API under ``/image``."""
    v2 = f"{IMAGE_ROOT}/v2"
    image_args = (bus, read, store, validators, max_body_bytes)
    app.add_route(IMAGE_ROOT, images.Versions())
    app.add_route(f"{v2}/images", images.ImageCollection(*image_args))
    app.add_route(f"{v2}/images/{{image_id}}", images.ImageItem(*image_args))
    app.add_route(f"{v2}/images/{{image_id}}/file", images.ImageData(*image_args))
    app.add_route(f"{v2}/images/{{image_id}}/tags/{{tag}}", actions.ImageTag(bus))
    for action in ("deactivate", "reactivate"):
        resource = actions.ImageAction(bus, active=action == "reactivate")
        app.add_route(f"{v2}/images/{{image_id}}/actions/{action}", resource)
    image_members = f"{v2}/images/{{image_id}}/members"
    app.add_route(image_members, members.MemberCollection(bus, read, max_body_bytes))
    app.add_route(f"{image_members}/{{member_id}}", members.MemberItem(bus, read, max_body_bytes))
    app.add_route(f"{v2}/tasks", tasks.TaskCollection(bus, read, max_body_bytes))
    app.add_route(f"{v2}/tasks/{{task_id}}", tasks.TaskItem(bus))
    app.add_route(f"{v2}/schemas/{{name}}", schemas.Schema())
    app.add_route(f"{v2}/info/import", schemas.ImportInfo())
    app.add_route(f"{v2}/schemas/metadefs/{{name}}", schemas.MetadefSchema())

    args = (bus, read, max_body_bytes)
    root = f"{v2}/metadefs"
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
