package compatkv

import (
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// Expiry: documents written with a 2 s expiry are gone after ~3 s; touch and GetAndTouch set it.
// One scenario with a single sleep keeps the suite fast: every document is prepared first, then
// the test waits once and checks each of them.

const twoSeconds = 2 * time.Second

func TestExpiryTouchAndGetAndTouch(t *testing.T) {
	t.Parallel()
	key := uniqueKey(t)
	expiring, inserted, replaced := key+"::expiring", key+"::inserted", key+"::replaced"
	touched, getAndTouched := key+"::touched", key+"::get-and-touched"
	cleared, forever := key+"::cleared", key+"::forever"
	// 31 days: gocb sends an absolute Unix time (anything over 30 days is absolute).
	month := key + "::month"

	res(collection.Upsert(expiring, map[string]string{"k": "expiring"}, &gocb.UpsertOptions{Expiry: twoSeconds})).must(t)
	res(collection.Insert(inserted, map[string]string{"k": "inserted"}, &gocb.InsertOptions{Expiry: twoSeconds})).must(t)
	res(collection.Upsert(replaced, map[string]any{"k": "replaced", "v": 1}, nil)).must(t)
	res(collection.Replace(replaced, map[string]any{"k": "replaced", "v": 2}, &gocb.ReplaceOptions{Expiry: twoSeconds})).must(t)

	created := res(collection.Upsert(touched, map[string]string{"k": "touched"}, &gocb.UpsertOptions{Expiry: twoSeconds})).must(t)
	touch := res(collection.Touch(touched, 60*time.Second, nil)).must(t)
	if touch.Cas() == created.Cas() || touch.Cas() == 0 {
		t.Fatal("touch did not return a new CAS")
	}

	res(collection.Upsert(getAndTouched, map[string]string{"k": "get-and-touched"}, nil)).must(t)
	result := res(collection.GetAndTouch(getAndTouched, twoSeconds, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, result), map[string]string{"k": "get-and-touched"})

	// A plain upsert without expiry resets the expiry to "never" (Couchbase semantics).
	res(collection.Upsert(cleared, map[string]any{"k": "cleared", "v": 1}, &gocb.UpsertOptions{Expiry: twoSeconds})).must(t)
	res(collection.Upsert(cleared, map[string]any{"k": "cleared", "v": 2}, nil)).must(t)
	res(collection.Upsert(forever, map[string]string{"k": "forever"}, nil)).must(t)
	res(collection.Upsert(month, map[string]string{"k": "month"}, &gocb.UpsertOptions{Expiry: 31 * 24 * time.Hour})).must(t)

	for _, live := range []string{expiring, inserted, replaced, touched, getAndTouched, cleared, forever, month} {
		if !exists(t, collection, live) {
			t.Fatalf("%s is missing right after being written", live)
		}
	}

	time.Sleep(3500 * time.Millisecond)

	for _, gone := range []string{expiring, inserted, replaced, getAndTouched} {
		_, err := collection.Get(gone, nil)
		isError(t, err, gocb.ErrDocumentNotFound)
		if exists(t, collection, gone) {
			t.Fatalf("%s still exists", gone)
		}
		// Expired through the KV door means gone through the HTTP door too.
		if status, body, err := srv.http("GET", docPath(gone), nil); err != nil || status != 404 {
			t.Fatalf("GET %s over HTTP answered %d %s (%v)", gone, status, body, err)
		}
	}
	jsonEqual(t, getContent[map[string]any](t, collection, touched), map[string]string{"k": "touched"})
	if body, _ := httpGet(t, touched); body["k"] != "touched" {
		t.Fatalf("touched over HTTP: %v", body)
	}
	jsonEqual(t, getContent[map[string]any](t, collection, cleared), map[string]any{"k": "cleared", "v": 2})
	jsonEqual(t, getContent[map[string]any](t, collection, forever), map[string]string{"k": "forever"})
	jsonEqual(t, getContent[map[string]any](t, collection, month), map[string]string{"k": "month"})
}

func TestExpiryAnExpiredKeyCanBeInsertedAgain(t *testing.T) {
	t.Parallel()
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]int{"v": 1}, &gocb.UpsertOptions{Expiry: time.Second})).must(t)
	time.Sleep(2500 * time.Millisecond)
	res(collection.Insert(key, map[string]int{"v": 2}, nil)).must(t)
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]int{"v": 2})
}

func TestExpiryTouchAndGetAndTouchOfAMissingKeyAreDocumentNotFound(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Touch(key, twoSeconds, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
	_, err = collection.GetAndTouch(key, twoSeconds, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
}
