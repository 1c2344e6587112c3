from __future__ import annotations

import hashlib

import pytest

from pytest_searcheval.x402 import strkey

# SEP-23 test vectors.
G = "GA7QYNF7SOWQ3GLR2BGMZEHXAVIRZA4KVWLTJJFC7MGXUA74P7UJVSGZ"
M_BIG = "MA7QYNF7SOWQ3GLR2BGMZEHXAVIRZA4KVWLTJJFC7MGXUA74P7UJVAAAAAAAAAAAAAJLK"
M_ZERO = "MA7QYNF7SOWQ3GLR2BGMZEHXAVIRZA4KVWLTJJFC7MGXUA74P7UJUAAAAAAAAAAAACJUQ"
C = "CA3D5KRYM6CB7OWQ6TWYRR3Z4T7GNZLKERYNZGGA5SOAOPIFY6YQGAXE"


def test_crc16_xmodem_check_value() -> None:
    assert strkey.crc16_xmodem(b"123456789") == 0x31C3


def test_sep23_muxed_vectors_decode_to_their_account() -> None:
    big = strkey.decode(M_BIG)
    assert (big.kind, big.muxed_id, big.account) == ("M", 9223372036854775808, G)
    zero = strkey.decode(M_ZERO)
    assert (zero.muxed_id, zero.account) == (0, G)
    assert strkey.account_of(M_BIG) == G
    assert strkey.account_of(G) == G


def test_round_trip_all_kinds() -> None:
    key = hashlib.sha256(b"k").digest()
    for text in (
        strkey.encode_account(key),
        strkey.encode_contract(key),
        strkey.encode_muxed(key, 0),
        strkey.encode_muxed(key, 2**64 - 1),
    ):
        assert strkey.decode(text).encode() == text
        assert strkey.is_valid(text)
    assert strkey.decode(C).kind == "C"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (M_BIG[:-1] + "L", "non-canonical"),  # SEP-23: unused trailing bit set
        (M_BIG + "A", "69 characters"),
        (M_BIG.lower(), "prefix"),
        (G[:-1] + ("A" if G[-1] != "A" else "B"), "checksum"),
        ("X" + G[1:], "prefix"),
        ("", "empty"),
        (G[:10], "56 characters"),
        ("G" + "=" * 55, "base32"),
    ],
)
def test_invalid_strkeys_are_refused_with_reason(text: str, why: str) -> None:
    with pytest.raises(strkey.StrkeyError, match=why):
        strkey.decode(text)
    assert not strkey.is_valid(text)


def test_kind_restriction_and_contract_has_no_account() -> None:
    with pytest.raises(strkey.StrkeyError, match="not accepted"):
        strkey.decode(C, "GM")
    with pytest.raises(strkey.StrkeyError):
        strkey.account_of(C)
    assert not strkey.is_valid(None)


def test_version_byte_must_match_prefix() -> None:
    # A G-length payload encoded with the C version byte but relabelled G fails.
    key = hashlib.sha256(b"v").digest()
    contract = strkey.encode_contract(key)
    with pytest.raises(strkey.StrkeyError):
        strkey.decode("G" + contract[1:])


def test_encode_rejects_bad_inputs() -> None:
    with pytest.raises(strkey.StrkeyError):
        strkey.encode_account(b"short")
    with pytest.raises(strkey.StrkeyError):
        strkey.encode_muxed(bytes(32), 2**64)
    with pytest.raises(strkey.StrkeyError):
        strkey.encode_muxed(bytes(32), -1)
