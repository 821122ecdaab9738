"""The handshake that opens every connection to an authenticated endpoint of kemu.

A cluster launched by ``kemu up`` has a secret (32 random bytes, in its cluster file, which
only its owner can read). Its store server, its control endpoint and its brokers' internal
ports take a connection only from a peer that proves it knows that secret, without the
secret crossing the socket (see docs/security.md):

1. the server writes ``CHALLENGE``: ``MAGIC`` and a fresh random nonce;
2. the client answers with HMAC-SHA256(secret, nonce || ``CLIENT_ROLE``);
3. the server compares it (``hmac.compare_digest``) and writes the verdict: ``ACCEPTED``
   followed by HMAC-SHA256(secret, nonce || ``SERVER_ROLE``), which shows the client that
   the server knows the secret too; or it closes the connection without a word.

Only then do frames (``protocol.codec``) flow, both ways. The role strings keep an answer
from ever being usable as a proof, or the other way round. A server gives the client
``HANDSHAKE_TIMEOUT`` seconds to answer.

This module is the handshake's arithmetic and a client for anyio byte streams (to probe an
endpoint before using it); ``cluster.network.tcp`` runs the same steps in its protocols.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

import anyio
from anyio.abc import ByteStream

from protocol.errors import NetworkError

SECRET_BYTES = 32
NONCE_BYTES = 32
MAGIC = b"KEMUAUTH"  # the challenge's first bytes: this is a kemu endpoint asking
CHALLENGE_BYTES = len(MAGIC) + NONCE_BYTES
ANSWER_BYTES = hashlib.sha256().digest_size
ACCEPTED = b"\x01"
VERDICT_BYTES = len(ACCEPTED) + ANSWER_BYTES
CLIENT_ROLE = b"kemu-client"
SERVER_ROLE = b"kemu-server"
HANDSHAKE_TIMEOUT = 5.0  # seconds a server waits for the answer

__all__ = [
    "ANSWER_BYTES",
    "CHALLENGE_BYTES",
    "HANDSHAKE_TIMEOUT",
    "SECRET_BYTES",
    "VERDICT_BYTES",
    "AuthError",
    "Challenge",
    "authenticate",
    "client_answer",
    "new_secret",
    "seeded_secret",
    "server_verdict",
]


class AuthError(NetworkError):
    """The handshake failed: the other end refused our credential, or did not prove its own."""


def new_secret() -> bytes:
    """A cluster's secret: 32 bytes from the operating system's CSPRNG."""
    return secrets.token_bytes(SECRET_BYTES)


def seeded_secret(seed: int) -> bytes:
    """The secret of a cluster on a virtual clock (a deterministic run): a function of its
    seed, so that two runs of one seed are the same run. Such a cluster listens on no socket
    another user could reach."""
    return hashlib.sha256(b"kemu-cluster-secret:%d" % seed).digest()


def _mac(secret: bytes, nonce: bytes, role: bytes) -> bytes:
    return hmac.new(secret, nonce + role, hashlib.sha256).digest()


class Challenge:
    """The server's side of one handshake: the challenge it writes, and its judgement of
    the answer."""

    __slots__ = ("_nonce", "_secret", "wire")

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        # The nonce must be unpredictable, so it comes from the CSPRNG, not the node's seeded
        # RNG; it never reaches a trace.
        self._nonce = secrets.token_bytes(NONCE_BYTES)
        self.wire = MAGIC + self._nonce

    def verdict(self, answer: bytes) -> bytes | None:
        """What to write back if ``answer`` proves the secret, else None (refused)."""
        expected = _mac(self._secret, self._nonce, CLIENT_ROLE)
        if len(answer) != ANSWER_BYTES or not hmac.compare_digest(answer, expected):
            return None
        return ACCEPTED + _mac(self._secret, self._nonce, SERVER_ROLE)


def client_answer(secret: bytes, challenge: bytes) -> bytes:
    """The client's answer to the server's challenge (``CHALLENGE_BYTES`` bytes);
    ``AuthError`` if the challenge is not a kemu endpoint's."""
    if len(challenge) != CHALLENGE_BYTES or not challenge.startswith(MAGIC):
        raise AuthError("the endpoint did not open with a kemu challenge")
    return _mac(secret, challenge[len(MAGIC) :], CLIENT_ROLE)


def server_verdict(secret: bytes, challenge: bytes, verdict: bytes) -> None:
    """Check the server's verdict (``VERDICT_BYTES`` bytes) on our answer to ``challenge``;
    ``AuthError`` unless it accepted and proved it knows the secret."""
    expected = ACCEPTED + _mac(secret, challenge[len(MAGIC) :], SERVER_ROLE)
    if not hmac.compare_digest(verdict, expected):
        raise AuthError("the endpoint did not prove it knows the cluster's secret")


async def _receive_exactly(stream: ByteStream, count: int, what: str) -> bytes:
    data = b""
    while len(data) < count:
        try:
            data += await stream.receive(count - len(data))
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
            raise AuthError(f"the endpoint closed the connection {what}") from exc
    return data


async def authenticate(stream: ByteStream, secret: bytes) -> None:
    """Run the client's side of the handshake on a freshly opened ``stream``; ``AuthError``
    if the endpoint refuses us or does not prove it knows the secret. The caller bounds it
    with its own deadline."""
    challenge = await _receive_exactly(stream, CHALLENGE_BYTES, "before challenging us")
    await stream.send(client_answer(secret, challenge))
    verdict = await _receive_exactly(
        stream, VERDICT_BYTES, "instead of accepting us: it refused the cluster's secret"
    )
    server_verdict(secret, challenge, verdict)
