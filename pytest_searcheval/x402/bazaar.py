"""x402 Bazaar listings as a facilitator catalogs them, through the official ``x402`` SDK.

A listing of the shipped catalog is what a Bazaar facilitator stores after a settlement:

1. the seller declares its discovery extension with the SDK (``declare_discovery_extension`` or
   ``declare_mcp_discovery_extension``, done in ``construction/build_corpus.py``), its resource
   server enriches it for the HTTP method (``bazaar_resource_server_extension``) and answers 402
   with a ``PaymentRequired`` (:func:`payment_required`);
2. the client pays the first option and echoes the resource and the extensions in its
   ``PaymentPayload``, which the resource server checks (``validate_extensions``);
3. the facilitator validates the extension against the protocol (``validate_discovery_extension_
   spec``) and against its own schema (``validate_and_extract``), extracts the discovery record
   (``extract_discovery_info``) and stores it in the shape its discovery API serves
   (``DiscoveryResource.to_dict``): :func:`catalog_record`.

:func:`refusals` runs steps 2 and 3 again on a stored record, rebuilt into the ``PaymentRequired``
it came from, and lists what the SDK refuses or changes; ``[]`` means a facilitator would store
exactly this record. The SDK (the ``x402`` extra) is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "WIRE_FIELDS",
    "ListingRefused",
    "catalog_record",
    "payment_required",
    "refusals",
    "require_sdk",
]

#: The fields of a discovered resource in the SDK's discovery API (``DiscoveryResource``).
WIRE_FIELDS: tuple[str, ...] = (
    "resource",
    "type",
    "x402Version",
    "accepts",
    "lastUpdated",
    "description",
    "mimeType",
    "serviceName",
    "tags",
    "iconUrl",
    "extensions",
)


class ListingRefused(ValueError):
    """The SDK refuses a listing; ``errors`` says what it found."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


def require_sdk() -> None:
    """Raise ImportError naming the extra when the official x402 SDK is missing."""
    try:
        import jsonschema  # noqa: F401  (the SDK's validators need it)
        import x402.extensions.bazaar  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"the official x402 SDK is needed here ({exc}); install it with: "
            "pip install 'pytest-searcheval[x402]'"
        ) from exc


def _resource_server() -> Any:
    """A seller's SDK resource server with the Bazaar extension registered."""
    from x402 import x402ResourceServerSync
    from x402.extensions.bazaar import bazaar_resource_server_extension

    server = x402ResourceServerSync()
    # The SDK's own singleton; its class lacks the protocol's optional hooks, which mypy wants.
    server.register_extension(bazaar_resource_server_extension)  # type: ignore[arg-type]
    return server


def payment_required(
    *,
    resource: str,
    description: str | None,
    mime_type: str | None,
    service_name: str | None,
    tags: Sequence[str] | None,
    accepts: Sequence[Mapping[str, Any]],
    extensions: Mapping[str, Any],
    method: str | None,
) -> Any:
    """The seller's 402 answer (an SDK ``PaymentRequired``): payment options and resource
    information as the SDK models them, the declared ``extensions`` enriched by the SDK's Bazaar
    resource-server extension for an HTTP ``method`` (None for an MCP tool)."""
    require_sdk()
    from x402.http.types import HTTPRequestContext
    from x402.schemas import PaymentRequirements, ResourceInfo

    server = _resource_server()
    context = None
    if method is not None:
        from urllib.parse import urlsplit

        # No route pattern: the listings have no path parameters, so no routeTemplate. No
        # adapter either: there is no request, and the Bazaar enrichment reads path and method
        # only, although the SDK annotates the adapter as required.
        context = HTTPRequestContext(adapter=None, path=urlsplit(resource).path, method=method)  # type: ignore[arg-type]
    enriched = server.enrich_extensions(dict(extensions), context)
    info = ResourceInfo(
        url=resource,
        description=description,
        mime_type=mime_type,
        service_name=service_name,
        tags=list(tags) if tags is not None else None,
    )
    requirements = [PaymentRequirements.model_validate(dict(o)) for o in accepts]
    return server.create_payment_required_response(requirements, info, extensions=enriched)


def catalog_record(required: Any, *, last_updated: str) -> dict[str, Any]:
    """What a facilitator stores for a settlement of ``required`` (a ``PaymentRequired``): the
    discovered-resource wire object. Raises :class:`ListingRefused` with the SDK's errors."""
    require_sdk()
    from pydantic import ValidationError
    from x402.extensions.bazaar import (
        BAZAAR,
        DiscoveryResource,
        extract_discovery_info,
        validate_and_extract,
        validate_discovery_extension_spec,
    )
    from x402.schemas import PaymentPayload

    if not required.accepts:
        raise ListingRefused(["no payment option: a facilitator never sees a settlement"])
    extensions = dict(required.extensions or {})
    declared = extensions.get(BAZAAR.key)
    if not isinstance(declared, dict):
        raise ListingRefused(["no bazaar extension: a facilitator does not catalog the resource"])
    payload = PaymentPayload(
        x402_version=2,
        payload={},
        accepted=required.accepts[0],
        resource=required.resource,
        extensions=extensions,
    )
    echo = _resource_server().validate_extensions(required, payload)
    errors: list[str] = []
    if not echo.valid:
        errors.append(f"resource server refuses the echoed extensions: {echo.invalid_reason}")
    spec = validate_discovery_extension_spec(declared)
    errors += [f"bazaar spec: {e}" for e in spec.errors]
    try:
        checked = validate_and_extract(declared)
    except ValidationError as exc:  # not even the shape of a discovery extension
        errors += [f"bazaar extension: {e['loc']}: {e['msg']}" for e in exc.errors()]
    else:
        errors += [f"bazaar schema: {e}" for e in checked.errors]
    if errors:
        raise ListingRefused(errors)
    found = extract_discovery_info(payload, payload.accepted, validate=True)
    if found is None:
        raise ListingRefused(["extract_discovery_info found no discovery information"])
    record = DiscoveryResource(
        resource=found.resource_url,
        type="mcp" if found.tool_name else "http",
        x402_version=found.x402_version,
        accepts=[a.model_dump(by_alias=True) for a in required.accepts],
        last_updated=last_updated,
        description=found.description,
        mime_type=found.mime_type,
        service_name=found.service_name,
        tags=found.tags,
        icon_url=found.icon_url,
        extensions=found.extensions,
    )
    return record.to_dict()


def refusals(wire: Mapping[str, Any]) -> list[str]:
    """What a facilitator would refuse or change in the stored record ``wire``; ``[]`` when
    the SDK, run on the ``PaymentRequired`` the record came from, stores exactly ``wire``."""
    require_sdk()
    from pydantic import ValidationError
    from x402.schemas import PaymentRequired, PaymentRequirements, ResourceInfo

    unknown = sorted(set(wire) - set(WIRE_FIELDS))
    if unknown:
        return [f"not a field of a discovered resource: {', '.join(unknown)}"]
    try:
        required = PaymentRequired(
            x402_version=int(wire.get("x402Version", 0)),
            resource=ResourceInfo(
                url=str(wire.get("resource", "")),
                description=wire.get("description"),
                mime_type=wire.get("mimeType"),
                service_name=wire.get("serviceName"),
                tags=wire.get("tags"),
                icon_url=wire.get("iconUrl"),
            ),
            accepts=[PaymentRequirements.model_validate(o) for o in wire.get("accepts") or []],
            extensions=wire.get("extensions"),
        )
    except (ValidationError, TypeError, ValueError) as exc:
        return [f"not an SDK PaymentRequired: {exc}"]
    if required.x402_version != 2:
        return [f"x402Version: expected 2, got {wire.get('x402Version')!r}"]
    try:
        stored = catalog_record(required, last_updated=str(wire.get("lastUpdated", "")))
    except ListingRefused as exc:
        return exc.errors
    changed = sorted(k for k in set(stored) | set(wire) if stored.get(k) != wire.get(k))
    if changed:
        return [f"the facilitator would store other values for: {', '.join(changed)}"]
    return []
