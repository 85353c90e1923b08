package compatkv

import (
	"errors"
	"reflect"
	"testing"

	"github.com/couchbase/gocb/v2"
)

// Sub-document operations through gocb: LookupIn / MutateIn across spec kinds, errors,
// store semantics, xattrs and the $document virtual xattr.

var subdocDoc = map[string]any{
	"name": "settee", "tags": []any{"db"}, "nested": map[string]any{"n": 7},
	"count": 1, "list": []any{1, 2, 3},
}

func TestSubdocLookupInGetExistsCount(t *testing.T) {
	key := uniqueKey(t)
	stored := res(collection.Upsert(key, subdocDoc, nil)).must(t)
	result := res(collection.LookupIn(key, []gocb.LookupInSpec{
		gocb.GetSpec("name", nil),
		gocb.GetSpec("nested.n", nil),
		gocb.ExistsSpec("tags", nil),
		gocb.ExistsSpec("missing", nil),
		gocb.CountSpec("list", nil),
		gocb.GetSpec("list[-1]", nil),
		gocb.GetSpec("missing", nil),
		gocb.GetSpec("name.first", nil),
	}, nil)).must(t)
	if result.Cas() != stored.Cas() {
		t.Fatalf("lookup CAS %d, want %d", result.Cas(), stored.Cas())
	}
	var name string
	noError(t, result.ContentAt(0, &name))
	var n, count, last int
	noError(t, result.ContentAt(1, &n))
	noError(t, result.ContentAt(4, &count))
	noError(t, result.ContentAt(5, &last))
	if name != "settee" || n != 7 || count != 3 || last != 3 {
		t.Fatalf("got %q %d %d %d", name, n, count, last)
	}
	if !result.Exists(2) || result.Exists(3) {
		t.Fatal("exists specs wrong")
	}
	var ignored any
	isError(t, result.ContentAt(6, &ignored), gocb.ErrPathNotFound)
	isError(t, result.ContentAt(7, &ignored), gocb.ErrPathMismatch)

	_, err := collection.LookupIn(uniqueKey(t)+"-absent", []gocb.LookupInSpec{gocb.GetSpec("a", nil)}, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
}

func TestSubdocMutateInSpecsAndCounterResults(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, subdocDoc, nil)).must(t)
	result := res(collection.MutateIn(key, []gocb.MutateInSpec{
		gocb.UpsertSpec("name", "couch", nil),
		gocb.InsertSpec("deep.er", true, &gocb.InsertSpecOptions{CreatePath: true}),
		gocb.ReplaceSpec("count", 10, nil),
		gocb.RemoveSpec("tags", nil),
		gocb.ArrayAppendSpec("list", 4, nil),
		gocb.ArrayPrependSpec("list", 0, nil),
		gocb.ArrayInsertSpec("list[1]", 9, nil),
		gocb.ArrayAddUniqueSpec("uniq", "x", &gocb.ArrayAddUniqueSpecOptions{CreatePath: true}),
		gocb.IncrementSpec("count", 5, nil),
		gocb.DecrementSpec("nested.n", 2, nil),
	}, nil)).must(t)
	var incremented, decremented int
	noError(t, result.ContentAt(8, &incremented))
	noError(t, result.ContentAt(9, &decremented))
	if incremented != 15 || decremented != 5 {
		t.Fatalf("counters %d %d, want 15 5", incremented, decremented)
	}
	got := getContent[map[string]any](t, collection, key)
	want := map[string]any{
		"name": "couch", "nested": map[string]any{"n": 5.0}, "count": 15.0,
		"list": []any{0.0, 9.0, 1.0, 2.0, 3.0, 4.0}, "deep": map[string]any{"er": true},
		"uniq": []any{"x"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("document %v, want %v", got, want)
	}
}

func TestSubdocMutateInFailuresChangeNothing(t *testing.T) {
	key := uniqueKey(t)
	stored := res(collection.Upsert(key, subdocDoc, nil)).must(t)
	for _, c := range []struct {
		spec gocb.MutateInSpec
		want error
	}{
		{gocb.InsertSpec("name", 1, nil), gocb.ErrPathExists},
		{gocb.ReplaceSpec("absent", 1, nil), gocb.ErrPathNotFound},
		{gocb.RemoveSpec("absent", nil), gocb.ErrPathNotFound},
		{gocb.ArrayAppendSpec("name", 1, nil), gocb.ErrPathMismatch},
		{gocb.UpsertSpec("no.parent", 1, nil), gocb.ErrPathNotFound},
	} {
		_, err := collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("count", 99, nil), c.spec}, nil)
		if !errors.Is(err, c.want) {
			t.Fatalf("got %v, want %v", err, c.want)
		}
	}
	_, err := collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)},
		&gocb.MutateInOptions{Cas: stored.Cas() + 1})
	// The server answers KEY_EEXISTS, as Couchbase does; gocb reports it for MutateIn as
	// "document exists" (its Replace maps the same status to CAS mismatch).
	if !errors.Is(err, gocb.ErrCasMismatch) && !errors.Is(err, gocb.ErrDocumentExists) {
		t.Fatalf("stale CAS: got %v", err)
	}
	after := res(collection.Get(key, nil)).must(t)
	if after.Cas() != stored.Cas() {
		t.Fatal("a failed mutation changed the document")
	}
}

func TestSubdocStoreSemantics(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)}, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	res(collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)},
		&gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsUpsert})).must(t)
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("b", 1, nil)},
		&gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsInsert})
	isError(t, err, gocb.ErrDocumentExists)
	if got := getContent[map[string]any](t, collection, key); !reflect.DeepEqual(got, map[string]any{"a": 1.0}) {
		t.Fatalf("document %v", got)
	}
}

func TestSubdocXattrsAndDocumentVattr(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]any{"v": 1}, nil)).must(t)
	res(collection.MutateIn(key, []gocb.MutateInSpec{
		gocb.UpsertSpec("app.owner", "alice", &gocb.UpsertSpecOptions{IsXattr: true, CreatePath: true}),
	}, nil)).must(t)
	if got := getContent[map[string]any](t, collection, key); !reflect.DeepEqual(got, map[string]any{"v": 1.0}) {
		t.Fatalf("xattr leaked into the body: %v", got)
	}
	result := res(collection.LookupIn(key, []gocb.LookupInSpec{
		gocb.GetSpec("app.owner", &gocb.GetSpecOptions{IsXattr: true}),
		gocb.GetSpec("$document.deleted", &gocb.GetSpecOptions{IsXattr: true}),
	}, nil)).must(t)
	var owner string
	var deleted bool
	noError(t, result.ContentAt(0, &owner))
	noError(t, result.ContentAt(1, &deleted))
	if owner != "alice" || deleted {
		t.Fatalf("owner %q deleted %v", owner, deleted)
	}
}
