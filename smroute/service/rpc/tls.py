"""Checks of the TLS files a config names, before serving with them (no gRPC):
PEM blocks present, key matching the certificate, a usable client CA bundle,
certificate dates."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

from smroute.service.settings import ConfigError, TlsConfig

__all__ = ["check_tls", "read_pem"]

#: Largest PEM file read (certificate bundles are small).
_MAX_PEM_BYTES = 1024 * 1024


def read_pem(path: Path, key: str, kind: str) -> bytes:
    """The bytes of PEM file ``path`` (config key ``key``), which must hold a
    ``kind`` block ("CERTIFICATE" or "PRIVATE KEY")."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(_MAX_PEM_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror or err}", key=key) from None
    if len(data) > _MAX_PEM_BYTES:
        raise ConfigError(f"{path} is larger than {_MAX_PEM_BYTES} bytes; expected a PEM file",
                          key=key)
    marker = b"-----BEGIN " + (b"CERTIFICATE-----" if kind == "CERTIFICATE" else b"")
    ok = marker in data and (kind == "CERTIFICATE" or b"PRIVATE KEY-----" in data)
    if not ok:
        raise ConfigError(f"{path} holds no PEM {kind} block; expected a "
                          f"'-----BEGIN {kind}-----' PEM file", key=key)
    if kind == "PRIVATE KEY" and b"ENCRYPTED" in data.split(b"-----END", 1)[0]:
        raise ConfigError(f"{path} is an encrypted private key; expected an unencrypted "
                          "PEM key readable only by the service user", key=key)
    return data


def check_tls(tls: TlsConfig, *, now: dt.datetime | None = None,
              warn_days: float = 30.0) -> tuple[str, ...]:
    """Check the TLS files of ``tls`` before serving with them.

    Raises :class:`ConfigError` (naming the key) when a file is missing, not
    PEM, the key does not belong to the certificate, the client CA bundle
    cannot be loaded, or the server certificate is expired or not yet valid
    at ``now`` (default: the current time).  Returns warnings, e.g. a
    certificate that expires within ``warn_days`` days.  (gRPC itself reports
    a mismatched key only as "Failed to bind to address".)
    """
    cert = read_pem(Path(tls.cert), "tls.cert", "CERTIFICATE")
    read_pem(Path(tls.key), "tls.key", "PRIVATE KEY")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(str(tls.cert), str(tls.key))
    except ssl.SSLError as err:
        why = "it does not belong to tls.cert" if "MISMATCH" in str(err).upper() else str(err)
        raise ConfigError(f"{tls.key}: cannot use this private key: {why}", key="tls.key") \
            from None
    if tls.client_ca is not None:
        read_pem(Path(tls.client_ca), "tls.client_ca", "CERTIFICATE")
        try:
            ctx.load_verify_locations(cafile=str(tls.client_ca))
        except ssl.SSLError as err:
            raise ConfigError(f"{tls.client_ca}: not a usable CA bundle: {err}",
                              key="tls.client_ca") from None
    return _validity_warnings(cert, "tls.cert", now, warn_days)


def _validity_warnings(pem: bytes, key: str, now: dt.datetime | None,
                       warn_days: float) -> tuple[str, ...]:
    """Errors for an expired / not yet valid first certificate in ``pem``,
    warnings when it expires soon.  Needs ``cryptography``; without it, no
    dates are checked."""
    try:
        from cryptography import x509
    except ImportError:  # optional: dates are then checked by the handshake only
        return ()
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as err:
        raise ConfigError(f"cannot parse the certificate: {err}", key=key) from None
    now = now or dt.datetime.now(dt.UTC)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    subject = cert.subject.rfc4514_string()
    if now < start:
        raise ConfigError(f"certificate {subject} is not valid before {start:%Y-%m-%d %H:%M} "
                          "UTC (check the clock or the certificate)", key=key)
    if now >= end:
        raise ConfigError(f"certificate {subject} expired on {end:%Y-%m-%d %H:%M} UTC", key=key)
    left = (end - now).total_seconds() / 86400.0
    if left < warn_days:
        return (f"{key}: certificate {subject} expires in {left:.1f} days "
                f"({end:%Y-%m-%d %H:%M} UTC)",)
    return ()
