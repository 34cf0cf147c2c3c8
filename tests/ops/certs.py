"""Test certificates made on the spot: a CA, a server certificate for 127.0.0.1, client certificates.

Generated with ``cryptography`` for each test session, so no key material is
checked in and nothing expires in the repository.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path

    def read(self) -> tuple[bytes, bytes]:
        return self.cert.read_bytes(), self.key.read_bytes()


@dataclass(frozen=True)
class Certs:
    ca: Path
    server: Pair
    client: Pair
    # signed by a CA the daemon does not trust
    stranger: Pair
    # a daemon of a cluster: serves 127.0.0.1 and is a client of the other daemons (both usages)
    peer: Pair


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("toolnexus test CA")
    other_key, other_cert = _ca("some other CA")
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    server = _leaf(directory, "server", ca_key, ca_cert, server=True)
    client = _leaf(directory, "client", ca_key, ca_cert, server=False)
    stranger = _leaf(directory, "stranger", other_key, other_cert, server=False)
    peer = _leaf(directory, "peer", ca_key, ca_cert, server=True, client=True)
    return Certs(ca=ca_path, server=server, client=client, stranger=stranger, peer=peer)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=1))


def _ca(common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _validity(x509.CertificateBuilder().subject_name(_name(common)).issuer_name(_name(common))
                        .public_key(key.public_key()).serial_number(x509.random_serial_number()))
    builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    builder = builder.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
    return key, builder.sign(key, hashes.SHA256())


def _leaf(directory: Path, name: str, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, *,
          server: bool, client: bool = False) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _validity(x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca_cert.subject)
                        .public_key(key.public_key()).serial_number(x509.random_serial_number()))
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client or not server else []
    builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server:
        alt = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = Pair(directory / f"{name}.pem", directory / f"{name}-key.pem")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pair.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    pair.key.chmod(0o600)
    return pair
