"""The metadata service's path labels: bounded, whatever paths guests ask (api/metadata/telemetry.py)."""

from __future__ import annotations

import pytest

from api.metadata.telemetry import OTHER, path_label


@pytest.mark.parametrize(
    ("path", "status", "label"),
    [
        ("/openstack/latest/meta_data.json", 200, "/openstack/{version}/meta_data.json"),
        ("/openstack/2012-08-10/user_data", 200, "/openstack/{version}/user_data"),
        ("/2009-04-04/meta-data/public-keys/0/openssh-key", 200, "/{version}/meta-data/public-keys/0"),
        ("/1.0/meta-data/", 200, "/{version}/meta-data"),
        ("/", 200, "/"),
        ("/openstack/latest/password", 204, "/openstack/{version}/password"),
        ("/anything/a/guest/asks", 404, OTHER),
        ("/openstack/latest/meta_data.json", 403, OTHER),
    ],
)
def test_a_paths_label(path: str, status: int, label: str) -> None:
    assert path_label(path, status) == label
