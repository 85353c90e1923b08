package compatkv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/couchbase/gocb/v2"
)

// Non-JSON values and flags round-trip byte for byte.

var everyByte = func() []byte {
	all := make([]byte, 256)
	for n := range all {
		all[n] = byte(n)
	}
	return all
}()

// flagsTranscoder writes bytes with chosen flags and reads back the bytes and the stored flags.
type flagsTranscoder struct{ flags uint32 }

type flagged struct {
	value []byte
	flags uint32
}

func (f flagsTranscoder) Encode(value interface{}) ([]byte, uint32, error) {
	return value.([]byte), f.flags, nil
}

func (f flagsTranscoder) Decode(raw []byte, flags uint32, out interface{}) error {
	*(out.(*flagged)) = flagged{append([]byte(nil), raw...), flags}
	return nil
}

func TestBinaryValueRoundTrips(t *testing.T) {
	key := uniqueKey(t)
	transcoder := gocb.NewRawBinaryTranscoder()
	mutation := res(collection.Upsert(key, everyByte, &gocb.UpsertOptions{Transcoder: transcoder})).must(t)
	result := res(collection.Get(key, &gocb.GetOptions{Transcoder: transcoder})).must(t)
	if value := contentOf[[]byte](t, result); !bytes.Equal(value, everyByte) {
		t.Fatalf("got %v", value)
	}
	if result.Cas() != mutation.Cas() {
		t.Fatal("get CAS differs from the upsert CAS")
	}
}

func TestBinaryFlagsAreKeptSoTheJSONTranscoderRefusesTheDocument(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, []byte(`{"looks":"like json"}`), &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder()})).must(t)
	// gocb's JSONTranscoder decides from the flags (binary common flags), not from the bytes.
	var value map[string]any
	err := res(collection.Get(key, nil)).must(t).Content(&value)
	if err == nil || !strings.Contains(err.Error(), "binary datatype is not supported by JSONTranscoder") {
		t.Fatalf("decoding a binary-flagged document as JSON gave %v (value %v)", err, value)
	}
}

func TestBinaryStringValueRoundTrips(t *testing.T) {
	key := uniqueKey(t)
	text := "plain text, not JSON: héllo ✓ \x00 end"
	transcoder := gocb.NewRawStringTranscoder()
	res(collection.Upsert(key, text, &gocb.UpsertOptions{Transcoder: transcoder})).must(t)
	if value := contentOf[string](t, res(collection.Get(key, &gocb.GetOptions{Transcoder: transcoder})).must(t)); value != text {
		t.Fatalf("got %q", value)
	}
}

func TestBinaryRawJSONIsStoredAsSentAndReadAsJSON(t *testing.T) {
	key := uniqueKey(t)
	raw := []byte(`{"b": 2, "a": [1, 2, {"c": null}]}`)
	res(collection.Upsert(key, raw, &gocb.UpsertOptions{Transcoder: gocb.NewRawJSONTranscoder()})).must(t)
	stored := contentOf[[]byte](t, res(collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawJSONTranscoder()})).must(t))
	if !bytes.Equal(stored, raw) {
		t.Fatalf("got %q", stored)
	}
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]any{"b": 2, "a": []any{1, 2, map[string]any{"c": nil}}})
}

func TestBinaryAnyFlagsRoundTrip(t *testing.T) {
	for _, flags := range []uint32{0x00000000, 0x03000000, 0x04000000, 0x12345678, 0xffffffff} {
		t.Run(fmt.Sprintf("0x%08x", flags), func(t *testing.T) {
			key := uniqueKey(t)
			res(collection.Upsert(key, []byte("payload"), &gocb.UpsertOptions{Transcoder: flagsTranscoder{flags}})).must(t)
			var got flagged
			noError(t, res(collection.Get(key, &gocb.GetOptions{Transcoder: flagsTranscoder{}})).must(t).Content(&got))
			if string(got.value) != "payload" || got.flags != flags {
				t.Fatalf("got %q flags 0x%08x, want payload 0x%08x", got.value, got.flags, flags)
			}
		})
	}
}

func TestBinaryZeroFlagsOnAJSONBodyStayZero(t *testing.T) {
	// Flags are opaque to the server: a JSON body written with flags 0 (legacy clients) reads back
	// with flags 0, not with the JSON common flags.
	key := uniqueKey(t)
	res(collection.Upsert(key, []byte(`{"a": 1}`), &gocb.UpsertOptions{Transcoder: flagsTranscoder{0}})).must(t)
	var got flagged
	noError(t, res(collection.Get(key, &gocb.GetOptions{Transcoder: flagsTranscoder{}})).must(t).Content(&got))
	if string(got.value) != `{"a": 1}` || got.flags != 0 {
		t.Fatalf("got %q flags 0x%08x, want flags 0", got.value, got.flags)
	}
}

func TestBinaryNonObjectJSONValuesRoundTrip(t *testing.T) {
	key := uniqueKey(t)
	for n, value := range []any{"just a string", []any{1, 2, 3}, 12.5, true, nil} {
		id := fmt.Sprintf("%s::%d", key, n)
		res(collection.Upsert(id, value, nil)).must(t)
		var raw []byte
		noError(t, res(collection.Get(id, &gocb.GetOptions{Transcoder: gocb.NewRawJSONTranscoder()})).must(t).Content(&raw))
		want, _ := json.Marshal(value)
		if !bytes.Equal(raw, want) {
			t.Fatalf("got %s, want %s", raw, want)
		}
	}
}

func TestBinaryEmptyAndLargeValuesRoundTrip(t *testing.T) {
	key := uniqueKey(t)
	transcoder := gocb.NewRawBinaryTranscoder()
	for suffix, value := range map[string][]byte{"empty": {}, "large": bytes.Repeat(everyByte, 4096)} {
		res(collection.Upsert(key+"::"+suffix, value, &gocb.UpsertOptions{Transcoder: transcoder})).must(t)
		got := contentOf[[]byte](t, res(collection.Get(key+"::"+suffix, &gocb.GetOptions{Transcoder: transcoder})).must(t))
		if !bytes.Equal(got, value) {
			t.Fatalf("%s: got %d bytes, want %d", suffix, len(got), len(value))
		}
	}
}
