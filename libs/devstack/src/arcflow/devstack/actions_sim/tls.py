"""A throwaway private CA for serving the Actions simulator over TLS, as a GitHub Enterprise
Server behind a company CA would be: root -> issuing intermediate -> server certificate for
127.0.0.1. For tests and local experiments only (keys live in memory, certificates for a day).
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def issue(name: str, issuer: Issued | None, *, ca: bool, path_length: int | None = None) -> Issued:
    """A certificate for ``name`` signed by ``issuer`` (self-signed without one); a leaf is
    valid for the server name 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=path_length), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(IPv4Address("127.0.0.1"))]),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return Issued(key, builder.sign(issuer.key if issuer else key, hashes.SHA256()))


@dataclass(frozen=True)
class PrivateChain:
    root: Issued
    intermediate: Issued
    server: Issued

    def server_context(self) -> ssl.SSLContext:
        """What the server presents: its certificate and the intermediate."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as folder:
            chain, key = Path(folder) / "chain.pem", Path(folder) / "key.pem"
            chain.write_text(self.server.pem + self.intermediate.pem)
            key.write_bytes(self.server.key_pem)
            context.load_cert_chain(chain, key)
        return context


def private_chain() -> PrivateChain:
    root = issue("arcflow test root", None, ca=True)
    intermediate = issue("arcflow test issuing CA", root, ca=True, path_length=0)
    return PrivateChain(root, intermediate, issue("127.0.0.1", intermediate, ca=False))
