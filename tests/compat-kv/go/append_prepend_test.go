package compatkv

import (
	"bytes"
	"testing"

	"github.com/couchbase/gocb/v2"
)

// append / prepend on raw string and raw binary documents.

func TestAppendAndPrependOnAStringDocument(t *testing.T) {
	key := uniqueKey(t)
	transcoder := gocb.NewRawStringTranscoder()
	created := res(collection.Upsert(key, "middle", &gocb.UpsertOptions{Transcoder: transcoder})).must(t)
	appended := res(collection.Binary().Append(key, []byte("-end"), nil)).must(t)
	if appended.Cas() == created.Cas() {
		t.Fatal("append did not change the CAS")
	}
	prepended := res(collection.Binary().Prepend(key, []byte("start-"), nil)).must(t)
	if prepended.Cas() == appended.Cas() {
		t.Fatal("prepend did not change the CAS")
	}
	// The flags stay those of a string document, so the string transcoder still accepts it.
	result := res(collection.Get(key, &gocb.GetOptions{Transcoder: transcoder})).must(t)
	if value := contentOf[string](t, result); value != "start-middle-end" {
		t.Fatalf("got %q", value)
	}
	if result.Cas() != prepended.Cas() {
		t.Fatal("get CAS differs from the prepend CAS")
	}
}

func TestAppendAndPrependOnABinaryDocument(t *testing.T) {
	key := uniqueKey(t)
	transcoder := gocb.NewRawBinaryTranscoder()
	res(collection.Upsert(key, []byte{1, 2}, &gocb.UpsertOptions{Transcoder: transcoder})).must(t)
	res(collection.Binary().Append(key, []byte{0, 255}, nil)).must(t)
	res(collection.Binary().Prepend(key, []byte{254}, nil)).must(t)
	value := contentOf[[]byte](t, res(collection.Get(key, &gocb.GetOptions{Transcoder: transcoder})).must(t))
	if !bytes.Equal(value, []byte{254, 1, 2, 0, 255}) {
		t.Fatalf("got %v", value)
	}
}

func TestAppendAndPrependOfAMissingKeyAreDocumentNotFound(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Binary().Append(key, []byte("x"), nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	_, err = collection.Binary().Prepend(key, []byte("x"), nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	if exists(t, collection, key) {
		t.Fatal("a failed append created the document")
	}
}

func TestAppendWithAStaleCasIsCasMismatch(t *testing.T) {
	key := uniqueKey(t)
	transcoder := gocb.NewRawStringTranscoder()
	stale := res(collection.Upsert(key, "a", &gocb.UpsertOptions{Transcoder: transcoder})).must(t).Cas()
	current := res(collection.Binary().Append(key, []byte("b"), nil)).must(t).Cas()
	_, err := collection.Binary().Append(key, []byte("c"), &gocb.AppendOptions{Cas: stale})
	isError(t, err, gocb.ErrCasMismatch)
	res(collection.Binary().Append(key, []byte("c"), &gocb.AppendOptions{Cas: current})).must(t)
	if value := contentOf[string](t, res(collection.Get(key, &gocb.GetOptions{Transcoder: transcoder})).must(t)); value != "abc" {
		t.Fatalf("got %q", value)
	}
}
