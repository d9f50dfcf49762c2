"""The TLS context of the Actions client when a GitHub server CA is configured.

A GitHub Enterprise Server behind a private CA is configured with that CA's certificate
(``githubServerTLS`` on the AutoscalingRunnerSet, ``server_root_ca`` in the listener config).
Admins often hand over the certificate that issued the server's certificate, which is an
intermediate, not the self-signed root. OpenSSL's default verification needs a chain that ends
at a self-signed root in the trust store and fails with "unable to get issuer certificate";
Go's verifier (what upstream ARC uses) accepts any trusted certificate as the anchor. With
``VERIFY_X509_PARTIAL_CHAIN`` OpenSSL does the same: a configured intermediate (or root) ends
the chain. The flag is set only when a CA is configured, on top of the system trust store
(docs/actions-client.md, "Private certificate authorities").
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any


def server_ssl_context(root_ca_pem: str) -> ssl.SSLContext:
    """The system trust store plus the CA certificate(s) of ``root_ca_pem``, any of which may
    end a chain (a root or an issuing intermediate)."""
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cadata=root_ca_pem)
    except (ssl.SSLError, ValueError) as exc:
        raise ValueError(f"root_ca_pem is not a valid PEM certificate bundle ({exc})") from None
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


class CABundleError(ValueError):
    """The CA an AutoscalingRunnerSet names (``githubServerTLS``) cannot be used; the text
    names the ConfigMap and the key."""


def ca_bundle_from_config_map(
    config_map: Mapping[str, Any] | None, namespace: str, github_server_tls: Mapping[str, Any]
) -> str:
    """The PEM bundle ``githubServerTLS.certificateFrom.configMapKeyRef`` points at in
    ``config_map`` (the ConfigMap read from ``namespace``, ``None`` when it does not exist);
    raises :class:`CABundleError` saying what is wrong (pure)."""
    name, key = ca_config_map_ref(github_server_tls)
    if not name or not key:
        raise CABundleError(
            "spec.githubServerTLS.certificateFrom.configMapKeyRef needs a name and a key"
        )
    where = f"ConfigMap {namespace}/{name}"
    if config_map is None:
        raise CABundleError(f"{where} (spec.githubServerTLS) not found")
    pem = (config_map.get("data") or {}).get(key)
    if not isinstance(pem, str) or not pem.strip():
        raise CABundleError(f"{where} (spec.githubServerTLS) has no key {key!r}")
    try:
        server_ssl_context(pem)
    except ValueError:
        raise CABundleError(
            f"{where} key {key!r} (spec.githubServerTLS) is not a PEM certificate bundle"
        ) from None
    return pem


def ca_config_map_ref(github_server_tls: Mapping[str, Any]) -> tuple[str, str]:
    """(ConfigMap name, key) of a ``githubServerTLS`` spec; empty strings when unset."""
    ref = (github_server_tls.get("certificateFrom") or {}).get("configMapKeyRef") or {}
    return str(ref.get("name") or ""), str(ref.get("key") or "")
