"""libvirt's errors classified as temporary, permanent or not found (by code and domain)."""

from __future__ import annotations

import libvirt
import pytest

from workers.libvirt_driver import classify
from workers.virt import DomainNotFound, PermanentVirtError, TemporaryVirtError


@pytest.mark.parametrize(
    ("code", "domain", "kind"),
    [
        (libvirt.VIR_ERR_OPERATION_TIMEOUT, libvirt.VIR_FROM_QEMU, TemporaryVirtError),
        (libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_FROM_QEMU, TemporaryVirtError),
        (libvirt.VIR_ERR_INTERNAL_ERROR, libvirt.VIR_FROM_RPC, TemporaryVirtError),
        (libvirt.VIR_ERR_NO_CONNECT, libvirt.VIR_FROM_REMOTE, TemporaryVirtError),
        (libvirt.VIR_ERR_INTERNAL_ERROR, libvirt.VIR_FROM_QEMU, PermanentVirtError),
        (libvirt.VIR_ERR_XML_ERROR, libvirt.VIR_FROM_DOMAIN, PermanentVirtError),
        (libvirt.VIR_ERR_INVALID_ARG, libvirt.VIR_FROM_DOMAIN, PermanentVirtError),
        (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_FROM_QEMU, DomainNotFound),
        (None, None, PermanentVirtError),
    ],
)
def test_classification(code: int | None, domain: int | None, kind: type) -> None:
    err = classify(code, domain, "boom")
    assert type(err) is kind
    assert (err.code, err.message) == (code, "boom")
