"""Images and key pairs, with a server's metadata and tags: the routes served by the commands of
``commands.images`` and ``commands.keypairs``, wired in one place, and the stores of image data and
of servers' user data.

``add_routes`` adds the image service (``api/image/``: ``/image``, ``/image/v2/...``), Nova's image
proxy (``/v2.1/images``), key pairs (``/v2.1/os-keypairs``) and server metadata and tags
(``/v2.1/servers/{id}/metadata``, ``.../tags``) to the app ``create_app`` builds.
"""

from __future__ import annotations

from pathlib import Path

import falcon

from api import image, keypairs, nova_images, server_fields
from api.body import load_validators
from api.readmodel import ReadModel
from commands.bus import MessageBus
from stratus.imagestore import ImageStore

SCHEMAS = ("images.create", "keypairs.create", "servers.metadata", "servers.metadata_item", "servers.tags")


def image_store(data_dir: Path) -> ImageStore:
    return ImageStore(data_dir / "images")


def add_routes(
    app: falcon.App, bus: MessageBus, read: ReadModel, data_dir: Path, max_body_bytes: int
) -> None:
    """Mount the image service, Nova's image proxy, key pairs and servers' metadata and tags; ``bus``
    carries their commands (with the deployment's image limits)."""
    validators = load_validators(SCHEMAS)
    image.add_routes(
        app,
        bus,
        read,
        image_store(data_dir),
        validators,
        max_body_bytes,
    )
    nova_images.add_routes(app, bus, read, max_body_bytes)

    keypair_args = (bus, read, validators, max_body_bytes)
    app.add_route("/v2.1/os-keypairs", keypairs.KeyPairCollection(*keypair_args))
    app.add_route("/v2.1/os-keypairs/{name}", keypairs.KeyPairItem(*keypair_args))

    field_args = (bus, validators, max_body_bytes)
    app.add_route("/v2.1/servers/{server_id}/metadata", server_fields.Metadata(*field_args))
    app.add_route("/v2.1/servers/{server_id}/metadata/{key}", server_fields.MetadataItem(*field_args))
    app.add_route("/v2.1/servers/{server_id}/tags", server_fields.Tags(*field_args))
    app.add_route("/v2.1/servers/{server_id}/tags/{tag}", server_fields.Tag(*field_args))
