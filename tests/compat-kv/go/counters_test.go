package compatkv

import (
	"testing"

	"github.com/couchbase/gocb/v2"
)

// Binary counters: increment / decrement with initial and delta, read back with get.

func TestCountersIncrementCreatesWithInitialThenAddsDelta(t *testing.T) {
	key := uniqueKey(t)
	counters := collection.Binary()
	// A missing counter is created holding `initial`; delta is not added on creation.
	created := res(counters.Increment(key, &gocb.IncrementOptions{Initial: 10, Delta: 5})).must(t)
	if created.Content() != 10 {
		t.Fatalf("created %d, want 10", created.Content())
	}
	incremented := res(counters.Increment(key, &gocb.IncrementOptions{Initial: 10, Delta: 5})).must(t)
	if incremented.Content() != 15 || incremented.Cas() == created.Cas() {
		t.Fatalf("incremented %d (CAS %d after %d), want 15 and a new CAS", incremented.Content(), incremented.Cas(), created.Cas())
	}
	decremented := res(counters.Decrement(key, &gocb.DecrementOptions{Initial: -1, Delta: 3})).must(t)
	if decremented.Content() != 12 || decremented.Cas() == incremented.Cas() {
		t.Fatalf("decremented %d, want 12 and a new CAS", decremented.Content())
	}
	result := res(collection.Get(key, nil)).must(t)
	if value := contentOf[int](t, result); value != 12 {
		t.Fatalf("get %d, want 12", value)
	}
	if result.Cas() != decremented.Cas() {
		t.Fatal("get CAS differs from the last counter CAS")
	}
}

func TestCountersDecrementCreatesWithInitialAndStopsAtZero(t *testing.T) {
	key := uniqueKey(t)
	counters := collection.Binary()
	for _, step := range []struct {
		options *gocb.DecrementOptions
		want    uint64
	}{
		{&gocb.DecrementOptions{Initial: 2, Delta: 1}, 2},
		{&gocb.DecrementOptions{Initial: -1, Delta: 5}, 0},
		{&gocb.DecrementOptions{Initial: -1, Delta: 1}, 0},
	} {
		if got := res(counters.Decrement(key, step.options)).must(t).Content(); got != step.want {
			t.Fatalf("decrement gave %d, want %d", got, step.want)
		}
	}
	if value := getContent[int](t, collection, key); value != 0 {
		t.Fatalf("get %d, want 0", value)
	}
}

func TestCountersIncrementOfAnExistingNumberDocument(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, 41, nil)).must(t)
	if got := res(collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 1})).must(t).Content(); got != 42 {
		t.Fatalf("increment gave %d, want 42", got)
	}
	if value := getContent[int](t, collection, key); value != 42 {
		t.Fatalf("get %d, want 42", value)
	}
}

func TestCountersOfAMissingKeyWithoutInitialAreDocumentNotFound(t *testing.T) {
	key := uniqueKey(t)
	// A negative Initial means "do not create" in gocb.
	_, err := collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 1})
	isError(t, err, gocb.ErrDocumentNotFound)
	_, err = collection.Binary().Decrement(key, &gocb.DecrementOptions{Initial: -1, Delta: 1})
	isError(t, err, gocb.ErrDocumentNotFound)
	if exists(t, collection, key) {
		t.Fatal("a failed counter operation created the document")
	}
}

func TestCountersIncrementOfANonNumericDocumentIsDeltaInvalid(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]string{"not": "a number"}, nil)).must(t)
	_, err := collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 1})
	isError(t, err, gocb.ErrDeltaInvalid)
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]string{"not": "a number"})
}
