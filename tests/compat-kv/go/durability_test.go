package compatkv

import (
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// Durable writes on a single node with no replicas, as Couchbase Server accepts them.
// Observe-based durability (PersistTo 1, the active node) polls OBSERVE until the mutation is
// persisted; synchronous durability (DurabilityLevelMajority) is a flexible-framing extra on the
// mutation. With zero replicas a majority is the active node alone, so both succeed.

// A durable write on one node is a local fsync: seconds are plenty.
const durableTimeout = 3 * time.Second

func durableUpsertAndRemove(t *testing.T, upsert *gocb.UpsertOptions, remove *gocb.RemoveOptions) {
	key := uniqueKey(t)
	mutation := res(collection.Upsert(key, map[string]string{"v": t.Name()}, upsert)).must(t)
	result := res(collection.Get(key, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, result), map[string]string{"v": t.Name()})
	if result.Cas() != mutation.Cas() {
		t.Fatal("get CAS differs from the upsert CAS")
	}
	res(collection.Remove(key, remove)).must(t)
	if exists(t, collection, key) {
		t.Fatal("exists after a durable remove")
	}
}

func TestDurabilityPersistToTheActiveNode(t *testing.T) {
	durableUpsertAndRemove(t,
		&gocb.UpsertOptions{PersistTo: 1, Timeout: durableTimeout},
		&gocb.RemoveOptions{PersistTo: 1, Timeout: durableTimeout})
}

func TestDurabilityLevelMajority(t *testing.T) {
	durableUpsertAndRemove(t,
		&gocb.UpsertOptions{DurabilityLevel: gocb.DurabilityLevelMajority, Timeout: durableTimeout},
		&gocb.RemoveOptions{DurabilityLevel: gocb.DurabilityLevelMajority, Timeout: durableTimeout})
}
