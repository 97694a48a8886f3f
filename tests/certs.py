"""Certificate factory for tests: a CA, a server certificate, client certificates.

Real X.509 certificates made with ``cryptography`` (EC P-256 keys, fast), written
as PEM files, for tests that run real gRPC servers with TLS / mutual TLS::

    from certs import make_pki            # tests/ is on sys.path under pytest

    pki = make_pki(tmp_path, clients=("operator", "intruder"))
    pki.server.cert_path, pki.server.key_path, pki.ca.cert_path   # server side
    pki.client("operator").cert_pem                              # client side
    pki.tls_config(require_client_cert=True)                     # -> TlsConfig
    pki.client_credentials("operator")                           # -> grpc.ChannelCredentials

The server certificate covers ``localhost``, ``127.0.0.1`` and ``::1``.
Client certificates carry the given common name and, as SANs, a DNS name
equal to it plus any extra DNS / URI names.  ``make_ca`` makes an unrelated
("rogue") CA whose certificates the server must reject.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertKey", "Pki", "make_ca", "make_cert", "make_pki", "SERVER_NAMES"]

#: Names the server certificate is valid for.
SERVER_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class CertKey:
    """One certificate and its private key, in memory and as PEM files."""

    name: str
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_path: Path
    key_path: Path

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write(directory: Path, name: str, cert: x509.Certificate,
           key: ec.EllipticCurvePrivateKey) -> CertKey:
    directory.mkdir(parents=True, exist_ok=True)
    ck = CertKey(name, cert, key, directory / f"{name}.crt", directory / f"{name}.key")
    ck.cert_path.write_bytes(ck.cert_pem)
    fd = os.open(ck.key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(ck.key_pem)
    return ck


def make_ca(directory: Path, name: str = "smroute-test-ca", *,
            now: dt.datetime | None = None, days: int = 3650) -> CertKey:
    """A self-signed CA certificate ``name`` (files ``name.crt`` / ``name.key``)."""
    now = now or _now()
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    return _write(Path(directory), name, cert, key)


def make_cert(ca: CertKey, directory: Path, common_name: str, *, server: bool = False,
              dns: Iterable[str] = (), ips: Iterable[str] = (), uris: Iterable[str] = (),
              file_name: str | None = None, now: dt.datetime | None = None,
              days: int = 365, expired: bool = False) -> CertKey:
    """A leaf certificate for ``common_name`` signed by ``ca``.

    ``server``: server-auth usage (else client-auth).  SANs: ``dns`` names,
    ``ips`` addresses, ``uris``.  ``expired``: validity ended yesterday.
    """
    now = now or _now()
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    sans += [x509.UniformResourceIdentifier(u) for u in uris]
    start, end = now - dt.timedelta(hours=1), now + dt.timedelta(days=days)
    if expired:
        start, end = now - dt.timedelta(days=10), now - dt.timedelta(days=1)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                       critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    return _write(Path(directory), file_name or common_name, cert, key)


@dataclass
class Pki:
    """A test PKI in ``directory``: ``ca``, ``server`` and named ``clients``."""

    directory: Path
    ca: CertKey
    server: CertKey
    clients: dict[str, CertKey] = field(default_factory=dict)

    def client(self, name: str, **kw: Any) -> CertKey:
        """The client certificate with CN ``name`` (made on first use; ``kw``
        go to :func:`make_cert`, e.g. ``uris=("spiffe://x/y",)``)."""
        if name not in self.clients:
            kw.setdefault("dns", (name,))
            self.clients[name] = make_cert(self.ca, self.directory, name, **kw)
        return self.clients[name]

    def tls_config(self, *, mutual: bool = True) -> Any:
        """A :class:`smroute.service.config.TlsConfig` for the server: mutual
        TLS (client certificates from this CA required) or server-only TLS."""
        from smroute.service.config import TlsConfig

        return TlsConfig(cert=self.server.cert_path, key=self.server.key_path,
                         client_ca=self.ca.cert_path if mutual else None,
                         require_client_cert=mutual)

    def tls_yaml(self, *, mutual: bool = True) -> str:
        """The ``tls:`` section of a daemon config for this PKI (YAML text)."""
        lines = ["tls:", f"  cert: {self.server.cert_path}", f"  key: {self.server.key_path}"]
        if mutual:
            lines += [f"  client_ca: {self.ca.cert_path}", "  require_client_cert: true"]
        return "\n".join(lines) + "\n"

    def client_credentials(self, name: str | None = None) -> Any:
        """``grpc.ChannelCredentials`` trusting this CA, presenting client
        certificate ``name`` (``None``: no client certificate)."""
        import grpc

        if name is None:
            return grpc.ssl_channel_credentials(root_certificates=self.ca.cert_pem)
        c = self.client(name)
        return grpc.ssl_channel_credentials(root_certificates=self.ca.cert_pem,
                                            private_key=c.key_pem, certificate_chain=c.cert_pem)


def make_pki(directory: str | os.PathLike[str], *, clients: Iterable[str] = ("operator",),
             server_names: Iterable[str] = SERVER_NAMES) -> Pki:
    """A CA, a server certificate for ``server_names`` (host names and IP
    addresses) and one client certificate per name in ``clients``, as PEM
    files in ``directory``."""
    d = Path(directory)
    ca = make_ca(d)
    names = list(server_names)
    ips, dns = [], []
    for n in names:
        try:
            ipaddress.ip_address(n)
            ips.append(n)
        except ValueError:
            dns.append(n)
    server = make_cert(ca, d, names[0], server=True, dns=dns, ips=ips, file_name="server")
    pki = Pki(d, ca, server)
    for c in clients:
        pki.client(c)
    return pki
