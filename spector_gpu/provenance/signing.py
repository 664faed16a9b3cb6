"""Ed25519 signing and verification of chain events (optional extra ``sign``:
``cryptography``, imported only when a key is used)."""

from __future__ import annotations

from typing import Any

from spector_gpu.errors import MissingExtraError, ValidationError

__all__ = ["Ed25519Signer", "is_valid_signature", "load_public_key", "verify_signature"]


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise MissingExtraError(
            "Ed25519 signing needs the 'cryptography' package; "
            "install it with: pip install 'spector-gpu[sign]'"
        ) from None
    return ed25519


def _raw(key: Any, private: bool) -> bytes:
    from cryptography.hazmat.primitives import serialization as ser

    if private:
        return bytes(key.private_bytes(ser.Encoding.Raw, ser.PrivateFormat.Raw, ser.NoEncryption()))
    return bytes(key.public_key().public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw))


class Ed25519Signer:
    """Signs events with an Ed25519 private key (optional extra ``sign``: ``cryptography``)."""

    def __init__(self, private_key_bytes: bytes) -> None:
        """Wrap a raw 32-byte Ed25519 private key (ValidationError on any other length)."""
        if not isinstance(private_key_bytes, bytes) or len(private_key_bytes) != 32:
            raise ValidationError("signer: private key must be 32 raw bytes (Ed25519 seed)")
        self._key = _crypto().Ed25519PrivateKey.from_private_bytes(private_key_bytes)

    @classmethod
    def generate(cls) -> Ed25519Signer:
        """A signer with a fresh random key; persist :attr:`private_key_bytes` to reuse it."""
        return cls(_raw(_crypto().Ed25519PrivateKey.generate(), private=True))

    @property
    def private_key_bytes(self) -> bytes:
        """Raw 32-byte private key. Secret: store it as you would a password."""
        return _raw(self._key, private=True)

    @property
    def public_key_bytes(self) -> bytes:
        """Raw 32-byte public key, for :func:`verify_chain`."""
        return _raw(self._key, private=False)

    def sign(self, data: bytes) -> bytes:
        """64-byte Ed25519 signature of ``data``."""
        return bytes(self._key.sign(data))

    def __repr__(self) -> str:  # never show the private key
        return f"Ed25519Signer(public_key={self.public_key_bytes.hex()})"


def load_public_key(public_key: bytes) -> Any:
    """The ``cryptography`` public key of 32 raw bytes (``ValidationError`` otherwise)."""
    if not isinstance(public_key, bytes) or len(public_key) != 32:
        raise ValidationError("public_key: must be 32 raw bytes (Ed25519)")
    return _crypto().Ed25519PublicKey.from_public_bytes(public_key)


def is_valid_signature(key: Any, signature: bytes, data: bytes) -> bool:
    """True when ``signature`` signs ``data`` under ``key`` (from :func:`load_public_key`)."""
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(signature, data)
    except InvalidSignature:
        return False
    return True


def verify_signature(public_key: bytes, signature: bytes, data: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``data`` under ``public_key``.

    Raises:
        ValidationError: ``public_key`` is not 32 raw bytes.
        MissingExtraError: ``cryptography`` is not installed (extra ``sign``).
    """
    return is_valid_signature(load_public_key(public_key), signature, data)
