"""Stellar strkeys: encode, decode and validate G (account), M (muxed account) and C (contract).

A strkey is RFC 4648 base32 (upper case, no padding) of ``version byte || payload || checksum``,
where the checksum is CRC16-XModem (polynomial 0x1021, initial value 0, no reflection) of
``version byte || payload``, stored little-endian. Version bytes: G = 6 << 3, M = 12 << 3,
C = 2 << 3. Payloads: G = 32-byte ed25519 public key, C = 32-byte contract id, M = 32-byte ed25519
key followed by the 64-bit muxed id, big-endian (SEP-23).

Decoding is strict, as in the Stellar SDKs: the text must re-encode to itself, so lower case,
padding, stray bits in the last base32 character and wrong lengths are all rejected.
"""

from __future__ import annotations

import base64
import binascii
import functools
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DecodedStrkey",
    "StrkeyError",
    "account_of",
    "crc16_xmodem",
    "decode",
    "encode_account",
    "encode_contract",
    "encode_muxed",
    "is_valid",
]

Kind = Literal["G", "M", "C"]

_VERSION: dict[str, int] = {"G": 6 << 3, "M": 12 << 3, "C": 2 << 3}
_KIND_OF_VERSION: dict[int, Kind] = {6 << 3: "G", 12 << 3: "M", 2 << 3: "C"}
_PAYLOAD_LEN: dict[str, int] = {"G": 32, "M": 40, "C": 32}
_TEXT_LEN: dict[str, int] = {"G": 56, "M": 69, "C": 56}
_UINT64_MAX = (1 << 64) - 1


class StrkeyError(ValueError):
    """The text is not a valid strkey of the expected kind; the message says why."""


@dataclass(frozen=True, slots=True)
class DecodedStrkey:
    """A decoded strkey. ``key`` is the 32-byte ed25519 key (G, M) or contract id (C);
    ``muxed_id`` is the uint64 id of an M address, else None."""

    kind: Kind
    key: bytes
    muxed_id: int | None = None

    @property
    def account(self) -> str:
        """The G account behind a G or M address."""
        if self.kind == "C":
            raise StrkeyError("a contract (C) address has no underlying account")
        return encode_account(self.key)

    def encode(self) -> str:
        if self.kind == "G":
            return encode_account(self.key)
        if self.kind == "C":
            return encode_contract(self.key)
        assert self.muxed_id is not None
        return encode_muxed(self.key, self.muxed_id)


def crc16_xmodem(data: bytes) -> int:
    """CRC16-XModem: poly 0x1021, init 0, MSB first, no final xor; check("123456789") = 0x31C3.

    ``binascii.crc_hqx`` with initial value 0 is exactly this CRC, computed in C.
    """
    return binascii.crc_hqx(data, 0)


def _encode(version: int, payload: bytes) -> str:
    body = bytes([version]) + payload
    checksum = crc16_xmodem(body).to_bytes(2, "little")
    return base64.b32encode(body + checksum).decode("ascii").rstrip("=")


def encode_account(key: bytes) -> str:
    """G address of a 32-byte ed25519 public key."""
    if len(key) != 32:
        raise StrkeyError(f"an account key is 32 bytes, got {len(key)}")
    return _encode(_VERSION["G"], key)


def encode_contract(contract_id: bytes) -> str:
    """C address of a 32-byte contract id."""
    if len(contract_id) != 32:
        raise StrkeyError(f"a contract id is 32 bytes, got {len(contract_id)}")
    return _encode(_VERSION["C"], contract_id)


def encode_muxed(key: bytes, muxed_id: int) -> str:
    """M address of a 32-byte ed25519 key and a uint64 id (SEP-23)."""
    if len(key) != 32:
        raise StrkeyError(f"an account key is 32 bytes, got {len(key)}")
    if not 0 <= muxed_id <= _UINT64_MAX:
        raise StrkeyError(f"a muxed id is an unsigned 64-bit integer, got {muxed_id}")
    return _encode(_VERSION["M"], key + muxed_id.to_bytes(8, "big"))


def decode(text: str, kinds: str = "GMC") -> DecodedStrkey:
    """Decode a G, M or C strkey (restricted to ``kinds``); raise StrkeyError saying why not."""
    if not isinstance(text, str):
        raise StrkeyError(f"a strkey is a string, got {type(text).__name__}")
    decoded = _decode_cached(text)
    if decoded.kind not in kinds:
        raise StrkeyError(
            f"a {decoded.kind} address is not accepted here: expected {', '.join(kinds)}"
        )
    return decoded


# Catalogs repeat the same payTo and asset addresses many times; decoding is pure.
@functools.lru_cache(maxsize=65536)
def _decode_cached(text: str) -> DecodedStrkey:
    if not text:
        raise StrkeyError("empty strkey")
    kind = text[0]
    if kind not in _VERSION:
        raise StrkeyError(f"unknown strkey prefix {kind!r}: expected one of G, M, C")
    if len(text) != _TEXT_LEN[kind]:
        raise StrkeyError(f"a {kind} strkey has {_TEXT_LEN[kind]} characters, got {len(text)}")
    padded = text + "=" * (-len(text) % 8)
    try:
        raw = base64.b32decode(padded, casefold=False)
    except (binascii.Error, ValueError) as exc:
        raise StrkeyError(f"not upper-case base32: {exc}") from None
    version, payload, checksum = raw[0], raw[1:-2], raw[-2:]
    if version != _VERSION[kind]:
        raise StrkeyError(f"version byte {version:#04x} does not match prefix {kind}")
    if len(payload) != _PAYLOAD_LEN[kind]:
        raise StrkeyError(f"a {kind} payload is {_PAYLOAD_LEN[kind]} bytes, got {len(payload)}")
    expected = crc16_xmodem(raw[:-2]).to_bytes(2, "little")
    if checksum != expected:
        raise StrkeyError("checksum mismatch (CRC16-XModem)")
    # Unused trailing bits must be zero, otherwise two texts would decode to one key.
    if _encode(version, payload) != text:
        raise StrkeyError("non-canonical encoding (unused trailing bits are set)")
    if kind == "M":
        return DecodedStrkey("M", payload[:32], int.from_bytes(payload[32:], "big"))
    return DecodedStrkey(_KIND_OF_VERSION[version], payload)


def is_valid(text: object, kinds: str = "GMC") -> bool:
    """True when ``text`` is a canonical strkey of one of ``kinds``."""
    if not isinstance(text, str):
        return False
    try:
        decode(text, kinds)
    except StrkeyError:
        return False
    return True


def account_of(text: str) -> str:
    """The G account of a G or M address (a G address is its own account)."""
    return decode(text, "GM").account
