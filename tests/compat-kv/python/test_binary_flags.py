"""Non-JSON values and flags round-trip byte for byte."""
from typing import Any, Tuple

import pytest
from couchbase.exceptions import ValueFormatException
from couchbase.options import GetOptions, UpsertOptions
from couchbase.transcoder import RawBinaryTranscoder, RawJSONTranscoder, RawStringTranscoder, Transcoder

EVERY_BYTE = bytes(range(256))


class FlagsTranscoder(Transcoder):
    """Writes bytes with chosen flags and reads back the bytes together with the stored flags."""

    def __init__(self, flags):
        self.flags = flags

    def encode_value(self, value: Any) -> Tuple[bytes, int]:
        return value, self.flags

    def decode_value(self, value: bytes, flags: int) -> Any:
        return bytes(value), flags


def test_binary_value_round_trips(collection, key):
    mutation = collection.upsert(key, EVERY_BYTE, UpsertOptions(transcoder=RawBinaryTranscoder()))
    result = collection.get(key, GetOptions(transcoder=RawBinaryTranscoder()))
    assert result.value == EVERY_BYTE
    assert result.cas == mutation.cas


def test_binary_flags_are_kept_so_the_json_transcoder_refuses_the_document(collection, key):
    collection.upsert(key, b"\x00not json", UpsertOptions(transcoder=RawBinaryTranscoder()))
    with pytest.raises(ValueFormatException):
        collection.get(key).content_as[dict]


def test_string_value_round_trips(collection, key):
    text = "plain text, not JSON: héllo ✓ \u0000 end"
    collection.upsert(key, text, UpsertOptions(transcoder=RawStringTranscoder()))
    assert collection.get(key, GetOptions(transcoder=RawStringTranscoder())).content_as[str] == text


def test_raw_json_is_stored_as_sent_and_read_as_json(collection, key):
    raw = b'{"b": 2, "a": [1, 2, {"c": null}]}'
    collection.upsert(key, raw, UpsertOptions(transcoder=RawJSONTranscoder()))
    assert collection.get(key, GetOptions(transcoder=RawJSONTranscoder())).value == raw
    assert collection.get(key).content_as[dict] == {"b": 2, "a": [1, 2, {"c": None}]}


@pytest.mark.parametrize("flags", [0x00000000, 0x03000000, 0x04000000, 0x12345678, 0xFFFFFFFF])
def test_any_flags_round_trip(collection, key, flags):
    collection.upsert(key, b"payload", UpsertOptions(transcoder=FlagsTranscoder(flags)))
    value, stored_flags = collection.get(key, GetOptions(transcoder=FlagsTranscoder(0))).value
    assert value == b"payload"
    assert stored_flags == flags


def test_zero_flags_on_a_json_body_stay_zero(collection, key):
    # Flags are opaque to the server: a JSON body written with flags 0 (legacy clients) reads back
    # with flags 0, not with the JSON common flags.
    collection.upsert(key, b'{"a": 1}', UpsertOptions(transcoder=FlagsTranscoder(0)))
    value, stored_flags = collection.get(key, GetOptions(transcoder=FlagsTranscoder(0))).value
    assert value == b'{"a": 1}'
    assert stored_flags == 0


def test_non_object_json_values_round_trip(collection, key):
    for number, value in enumerate(["just a string", [1, 2, 3], 12.5, True, None]):
        collection.upsert(f"{key}::{number}", value)
        assert collection.get(f"{key}::{number}").content_as[lambda raw: raw] == value


def test_empty_and_large_binary_values_round_trip(collection, key):
    large = EVERY_BYTE * 4096  # 1 MiB
    for suffix, value in (("empty", b""), ("large", large)):
        collection.upsert(f"{key}::{suffix}", value, UpsertOptions(transcoder=RawBinaryTranscoder()))
        result = collection.get(f"{key}::{suffix}", GetOptions(transcoder=RawBinaryTranscoder()))
        assert result.value == value, suffix
