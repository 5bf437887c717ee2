"""schemas/openapi.json is a valid OpenAPI 3.1 document."""

from __future__ import annotations

from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

from api.openapi import DOCUMENT


def test_the_document_is_valid_openapi() -> None:
    spec, base_uri = read_from_filename(str(DOCUMENT))
    validate(spec, base_uri=base_uri)
