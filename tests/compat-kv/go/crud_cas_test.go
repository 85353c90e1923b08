package compatkv

import (
	"strings"
	"testing"

	"github.com/couchbase/gocb/v2"
)

// upsert / insert / replace / remove with and without CAS, and the errors real Couchbase gives.

func TestCrudUpsertThenGetReturnsContentAndTheSameCas(t *testing.T) {
	key := uniqueKey(t)
	document := map[string]any{"name": "Ünïcode ✓", "n": 1, "nested": map[string]any{"list": []any{1, 2.5, nil, true}}}
	mutation := res(collection.Upsert(key, document, nil)).must(t)
	if mutation.Cas() == 0 {
		t.Fatal("zero CAS")
	}
	result := res(collection.Get(key, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, result), document)
	if result.Cas() != mutation.Cas() {
		t.Fatalf("get CAS %d, upsert CAS %d", result.Cas(), mutation.Cas())
	}
}

func TestCrudUpsertOverwritesAndChangesCas(t *testing.T) {
	key := uniqueKey(t)
	first := res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	second := res(collection.Upsert(key, map[string]int{"v": 2}, nil)).must(t)
	if second.Cas() == first.Cas() || second.Cas() == 0 {
		t.Fatalf("CAS %d then %d", first.Cas(), second.Cas())
	}
	result := res(collection.Get(key, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, result), map[string]int{"v": 2})
	if result.Cas() != second.Cas() {
		t.Fatalf("get CAS %d, upsert CAS %d", result.Cas(), second.Cas())
	}
}

func TestCrudInsertOfAnExistingKeyIsDocumentExists(t *testing.T) {
	key := uniqueKey(t)
	inserted := res(collection.Insert(key, map[string]string{"v": "first"}, nil)).must(t)
	_, err := collection.Insert(key, map[string]string{"v": "second"}, nil)
	isError(t, err, gocb.ErrDocumentExists)
	result := res(collection.Get(key, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, result), map[string]string{"v": "first"})
	if result.Cas() != inserted.Cas() {
		t.Fatal("CAS changed by a failed insert")
	}
}

func TestCrudReplaceWithTheCurrentCasSucceeds(t *testing.T) {
	key := uniqueKey(t)
	created := res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	replaced := res(collection.Replace(key, map[string]int{"v": 2}, &gocb.ReplaceOptions{Cas: created.Cas()})).must(t)
	if replaced.Cas() == created.Cas() || replaced.Cas() == 0 {
		t.Fatal("CAS did not change")
	}
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]int{"v": 2})
}

func TestCrudReplaceWithoutCasSucceeds(t *testing.T) {
	key := uniqueKey(t)
	created := res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	replaced := res(collection.Replace(key, map[string]int{"v": 3}, nil)).must(t)
	if replaced.Cas() == created.Cas() {
		t.Fatal("CAS did not change")
	}
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]int{"v": 3})
}

func TestCrudReplaceWithAStaleCasIsCasMismatch(t *testing.T) {
	key := uniqueKey(t)
	stale := res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t).Cas()
	current := res(collection.Upsert(key, map[string]int{"v": 2}, nil)).must(t).Cas()
	_, err := collection.Replace(key, map[string]string{"v": "lost"}, &gocb.ReplaceOptions{Cas: stale})
	isError(t, err, gocb.ErrCasMismatch)
	result := res(collection.Get(key, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, result), map[string]int{"v": 2})
	if result.Cas() != current {
		t.Fatal("CAS changed by a failed replace")
	}
}

func TestCrudRemoveWithAStaleCasIsCasMismatchThenWithTheCurrentCasRemoves(t *testing.T) {
	key := uniqueKey(t)
	stale := res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t).Cas()
	current := res(collection.Upsert(key, map[string]int{"v": 2}, nil)).must(t).Cas()
	_, err := collection.Remove(key, &gocb.RemoveOptions{Cas: stale})
	isError(t, err, gocb.ErrCasMismatch)
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]int{"v": 2})
	removed := res(collection.Remove(key, &gocb.RemoveOptions{Cas: current})).must(t)
	if removed.Cas() == current || removed.Cas() == 0 {
		t.Fatal("remove did not return a new CAS")
	}
	_, err = collection.Get(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
}

func TestCrudRemoveWithoutCasRemoves(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	res(collection.Remove(key, nil)).must(t)
	_, err := collection.Get(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	_, err = collection.Remove(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
}

func TestCrudInsertAfterRemoveSucceeds(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	res(collection.Remove(key, nil)).must(t)
	res(collection.Insert(key, map[string]string{"v": "again"}, nil)).must(t)
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]string{"v": "again"})
}

func TestCrudGetReplaceRemoveOfAMissingKeyAreDocumentNotFound(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Get(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	_, err = collection.Replace(key, map[string]int{"v": 1}, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	_, err = collection.Remove(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	// A failed replace must not have created the document.
	_, err = collection.Get(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
}

func TestCrudReplaceWithTheCasOfARemovedKeyIsDocumentNotFound(t *testing.T) {
	key := uniqueKey(t)
	cas := res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t).Cas()
	res(collection.Remove(key, nil)).must(t)
	_, err := collection.Replace(key, map[string]int{"v": 2}, &gocb.ReplaceOptions{Cas: cas})
	isError(t, err, gocb.ErrDocumentNotFound)
}

func TestExistsTrueWithTheCasFalseForMissingAndRemoved(t *testing.T) {
	key := uniqueKey(t)
	cas := res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t).Cas()
	present := res(collection.Exists(key, nil)).must(t)
	if !present.Exists() || present.Cas() != cas {
		t.Fatalf("exists=%v cas=%d, want true %d", present.Exists(), present.Cas(), cas)
	}
	if exists(t, collection, key+"::missing") {
		t.Fatal("a missing key exists")
	}
	res(collection.Remove(key, nil)).must(t)
	if exists(t, collection, key) {
		t.Fatal("a removed key exists")
	}
}

func TestCrudA250ByteKeyAndAMultibyteKeyRoundTrip(t *testing.T) {
	// 250 bytes is Couchbase's key length limit (the collection prefix does not count).
	longest := ("go::long::" + strings.Repeat("k", 250))[:250]
	multibyte := uniqueKey(t) + "::ключ-鍵-🔑"
	for _, key := range []string{longest, multibyte} {
		cas := res(collection.Upsert(key, map[string]string{"key": key}, nil)).must(t).Cas()
		result := res(collection.Get(key, nil)).must(t)
		jsonEqual(t, contentOf[map[string]any](t, result), map[string]string{"key": key})
		if result.Cas() != cas {
			t.Fatalf("%s: get CAS differs from the upsert CAS", key)
		}
	}
}
