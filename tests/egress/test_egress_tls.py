"""TLS through the pinned transport: the dial goes to the checked address while SNI and
certificate verification use the name (a local CA, a server on 127.0.0.1)."""

from __future__ import annotations

import datetime as dt
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from egress_support import FakeResolver, FakeRules, RecordingBackend, Server

from runtime.egress import EgressGateway, PinnedTransport
from runtime.errors import ToolFailed

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

pytestmark = pytest.mark.anyio


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer_key: ec.EllipticCurvePrivateKey,
    issuer: str,
    *,
    ca: bool,
    san: str | None = None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
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
    if san is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[Server, ssl.SSLContext]]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test CA", ca_key, ca_key, "test CA", ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = _cert("secure.test", leaf_key, ca_key, "test CA", ca=False, san="secure.test")
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "leaf.pem").write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM)
        + leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "leaf.pem")
    server = Server("tls")
    server.socket = server_ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    try:
        yield server, client_ctx
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def _gateway(ctx: ssl.SSLContext, rec: RecordingBackend, **names: str) -> EgressGateway:
    resolver = FakeResolver({name: [[ip]] for name, ip in names.items()})
    rules = FakeRules(named=set(names) | {"127.0.0.1"})
    return EgressGateway(
        rules,
        resolver=resolver,
        transport_factory=lambda: PinnedTransport(ssl_context=ctx, network_backend=rec),
    )


async def test_https_dials_address_verifies_name(tls: tuple[Server, ssl.SSLContext]) -> None:
    server, ctx = tls
    port = server.server_address[1]
    rec = RecordingBackend()
    async with _gateway(ctx, rec, **{"secure.test": "127.0.0.1"}) as gw:
        reply = await gw.handle("http", {"url": f"https://secure.test:{port}/hello"})
    assert reply["body"] == b"hello"
    assert rec.dialled == [("127.0.0.1", port)]
    assert server.log[0]["headers"]["Host"] == f"secure.test:{port}"


async def test_https_wrong_name_fails_verification(tls: tuple[Server, ssl.SSLContext]) -> None:
    server, ctx = tls
    rec = RecordingBackend()
    async with _gateway(ctx, rec, **{"other.test": "127.0.0.1"}) as gw:
        with pytest.raises(ToolFailed, match=r"(?i)certificate"):
            await gw.handle("http", {"url": f"https://other.test:{server.server_address[1]}/"})
    assert server.log == []


async def test_https_by_address_fails_verification(tls: tuple[Server, ssl.SSLContext]) -> None:
    server, ctx = tls
    async with _gateway(ctx, RecordingBackend()) as gw:
        with pytest.raises(ToolFailed, match=r"(?i)certificate"):
            await gw.handle("http", {"url": f"https://127.0.0.1:{server.server_address[1]}/"})
    assert server.log == []
