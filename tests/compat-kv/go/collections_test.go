package compatkv

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// Scopes and collections (issue 19) through gocb: its collection manager creates a scope and
// two collections on the management port; each takes CRUD, CAS, sub-document lookups and
// mutations and expiry; the same key in two collections is two documents; a dropped
// collection's documents are gone and its name comes back empty; unknown names get gocb's own
// errors.

func newScopeName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

func TestCollectionsManagerCreatesListsAndRefuses(t *testing.T) {
	bucket := cluster.Bucket("default")
	manager := bucket.CollectionsV2()
	scope := newScopeName("inv")
	noError(t, manager.CreateScope(scope, nil))
	noError(t, manager.CreateCollection(scope, "airline", &gocb.CreateCollectionSettings{MaxExpiry: time.Hour}, nil))
	noError(t, manager.CreateCollection(scope, "route", nil, nil))

	scopes := res(manager.GetAllScopes(nil)).must(t)
	found := map[string]gocb.CollectionSpec{}
	sawDefault := false
	for _, spec := range scopes {
		sawDefault = sawDefault || spec.Name == "_default"
		if spec.Name == scope {
			for _, collection := range spec.Collections {
				found[collection.Name] = collection
			}
		}
	}
	if !sawDefault || len(found) != 2 || found["airline"].MaxExpiry != time.Hour {
		t.Fatalf("scopes listed: %+v", scopes)
	}
	isError(t, manager.CreateScope(scope, nil), gocb.ErrScopeExists)
	isError(t, manager.CreateCollection(scope, "route", nil, nil), gocb.ErrCollectionExists)
	isError(t, manager.CreateCollection("no-such-scope", "c", nil, nil), gocb.ErrScopeNotFound)
	isError(t, manager.DropCollection(scope, "no-such-collection", nil), gocb.ErrCollectionNotFound)
	isError(t, manager.DropScope("no-such-scope", nil), gocb.ErrScopeNotFound)
}

func TestCollectionsCrudCasSubdocAndExpiryInEachCollection(t *testing.T) {
	bucket := cluster.Bucket("default")
	manager := bucket.CollectionsV2()
	scope := newScopeName("crud")
	noError(t, manager.CreateScope(scope, nil))
	noError(t, manager.CreateCollection(scope, "airline", nil, nil))
	noError(t, manager.CreateCollection(scope, "route", nil, nil))
	key := uniqueKey(t)
	collections := []*gocb.Collection{
		bucket.Scope(scope).Collection("airline"), bucket.Scope(scope).Collection("route"),
	}
	for _, c := range collections {
		name := c.Name()
		created := res(c.Insert(key, map[string]any{"in": name, "n": 1}, nil)).must(t)
		_, err := c.Insert(key, map[string]any{"again": true}, nil)
		isError(t, err, gocb.ErrDocumentExists)
		got := res(c.Get(key, nil)).must(t)
		if got.Cas() != created.Cas() {
			t.Fatalf("%s: get CAS %d, insert CAS %d", name, got.Cas(), created.Cas())
		}
		jsonEqual(t, contentOf[map[string]any](t, got), map[string]any{"in": name, "n": 1})
		replaced := res(c.Replace(key, map[string]any{"in": name, "n": 2}, &gocb.ReplaceOptions{Cas: got.Cas()})).must(t)
		_, err = c.Replace(key, map[string]any{"stale": true}, &gocb.ReplaceOptions{Cas: got.Cas()})
		isError(t, err, gocb.ErrCasMismatch)
		looked := res(c.LookupIn(key, []gocb.LookupInSpec{gocb.GetSpec("in", nil), gocb.ExistsSpec("n", nil)}, nil)).must(t)
		var in string
		noError(t, looked.ContentAt(0, &in))
		if in != name || !looked.Exists(1) {
			t.Fatalf("%s: lookup gave %q", name, in)
		}
		mutated := res(c.MutateIn(key, []gocb.MutateInSpec{
			gocb.UpsertSpec("extra", name, nil), gocb.IncrementSpec("n", 5, nil),
		}, nil)).must(t)
		if mutated.Cas() == replaced.Cas() {
			t.Fatalf("%s: mutateIn kept the CAS", name)
		}
		jsonEqual(t, getContent[map[string]any](t, c, key), map[string]any{"extra": name, "in": name, "n": 7})
		res(c.Upsert(key+"::expiring", map[string]any{"in": name}, &gocb.UpsertOptions{Expiry: 2 * time.Second})).must(t)
		res(c.Upsert(key+"::removed", map[string]any{"in": name}, nil)).must(t)
		res(c.Remove(key+"::removed", nil)).must(t)
		_, err = c.Get(key+"::removed", nil)
		isError(t, err, gocb.ErrDocumentNotFound)
	}
	defaults := bucket.DefaultCollection()
	_, err := defaults.Get(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	res(defaults.Upsert(key, map[string]any{"in": "_default"}, nil)).must(t)
	time.Sleep(3500 * time.Millisecond)
	for _, c := range collections {
		_, err := c.Get(key+"::expiring", nil)
		isError(t, err, gocb.ErrDocumentNotFound)
		if got := getContent[map[string]any](t, c, key); got["in"] != c.Name() {
			t.Fatalf("%s holds %v", c.Name(), got)
		}
	}
	jsonEqual(t, getContent[map[string]any](t, defaults, key), map[string]any{"in": "_default"})
}

func TestCollectionsADroppedCollectionComesBackEmpty(t *testing.T) {
	bucket := cluster.Bucket("default")
	manager := bucket.CollectionsV2()
	scope := newScopeName("drop")
	noError(t, manager.CreateScope(scope, nil))
	noError(t, manager.CreateCollection(scope, "temp", nil, nil))
	key := uniqueKey(t)
	before := bucket.Scope(scope).Collection("temp")
	res(before.Upsert(key, map[string]any{"v": "before"}, nil)).must(t)
	jsonEqual(t, getContent[map[string]any](t, before, key), map[string]any{"v": "before"})
	noError(t, manager.DropCollection(scope, "temp", nil))
	_, err := before.Get(key, nil)
	if err == nil || errors.Is(err, gocb.ErrDocumentNotFound) {
		t.Fatalf("a dropped collection answered %v", err)
	}
	noError(t, manager.CreateCollection(scope, "temp", nil, nil))
	again := bucket.Scope(scope).Collection("temp")
	_, err = again.Get(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	res(again.Upsert(key, map[string]any{"v": "after"}, nil)).must(t)
	jsonEqual(t, getContent[map[string]any](t, again, key), map[string]any{"v": "after"})
}

// gocbcore retries an operation on an unknown scope or collection with the reason
// KV_COLLECTION_OUTDATED ("either the collection will eventually come online or this request
// will timeout", collectionscomponent.go), as against Couchbase Server: the reason in the
// timeout shows the door answered UNKNOWN_SCOPE / UNKNOWN_COLLECTION, not nothing.
func TestCollectionsUnknownScopesAndCollectionsAreRetriedAsOutdated(t *testing.T) {
	key := uniqueKey(t)
	bucket := cluster.Bucket("default")
	for _, c := range []*gocb.Collection{
		bucket.Scope("no-such-scope").Collection("c"),
		bucket.Scope("_default").Collection("no-such-collection"),
	} {
		_, err := c.Get(key, nil)
		isError(t, err, gocb.ErrTimeout)
		if !strings.Contains(err.Error(), "KV_COLLECTION_OUTDATED") {
			t.Fatalf("%s.%s: %v", c.ScopeName(), c.Name(), err)
		}
	}
}
