package compatkv

import (
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// Pessimistic locking: GetAndLock, mutations blocked without the lock CAS, Unlock, lock timeout.
// Against Couchbase Server a mutation of a locked document answers LOCKED (TMPFAIL for old
// clients); gocb retries it (reason KV_LOCKED / KV_TEMPORARY_FAILURE) until its timeout, so the
// application sees a TimeoutError naming that retry reason (or ErrDocumentLocked).

const (
	lockTime = 15 * time.Second
	short    = time.Second
	// How long an operation expected to be refused may keep retrying.
	refuse = 500 * time.Millisecond
)

func refusedAsLocked(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("a mutation of a locked document succeeded")
	}
	if errors.Is(err, gocb.ErrDocumentLocked) || errors.Is(err, gocb.ErrTemporaryFailure) {
		return
	}
	var timeout *gocb.TimeoutError
	if !errors.As(err, &timeout) {
		t.Fatalf("expected a locked refusal, got %v", err)
	}
	for _, reason := range timeout.RetryReasons {
		if reason.Description() == "KV_LOCKED" || reason.Description() == "KV_TEMPORARY_FAILURE" {
			return
		}
	}
	t.Fatalf("timed out for another reason: %v", err)
}

func TestLocksMutationsWithoutTheLockCasFailAndUnlockWithItWorks(t *testing.T) {
	t.Parallel()
	key := uniqueKey(t)
	before := res(collection.Upsert(key, map[string]string{"v": "original"}, nil)).must(t).Cas()
	locked := res(collection.GetAndLock(key, lockTime, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, locked), map[string]string{"v": "original"})
	if locked.Cas() == before || locked.Cas() == 0 {
		t.Fatal("the lock CAS is not a new CAS")
	}

	_, err := collection.Upsert(key, map[string]string{"v": "upsert"}, &gocb.UpsertOptions{Timeout: refuse})
	refusedAsLocked(t, err)
	_, err = collection.Replace(key, map[string]string{"v": "replace"}, &gocb.ReplaceOptions{Timeout: refuse})
	refusedAsLocked(t, err)
	_, err = collection.Replace(key, map[string]string{"v": "old cas"}, &gocb.ReplaceOptions{Cas: before, Timeout: refuse})
	refusedAsLocked(t, err)
	_, err = collection.Remove(key, &gocb.RemoveOptions{Timeout: refuse})
	refusedAsLocked(t, err)
	_, err = collection.GetAndLock(key, lockTime, &gocb.GetAndLockOptions{Timeout: refuse})
	refusedAsLocked(t, err)
	_, err = collection.Touch(key, time.Minute, &gocb.TouchOptions{Timeout: refuse})
	refusedAsLocked(t, err)
	_, err = collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 1, Timeout: refuse})
	refusedAsLocked(t, err)

	// A plain read still works while locked, and does not reveal the lock CAS.
	during := res(collection.Get(key, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, during), map[string]string{"v": "original"})
	if during.Cas() == locked.Cas() {
		t.Fatal("a plain get revealed the lock CAS")
	}

	noError(t, collection.Unlock(key, locked.Cas(), nil))
	res(collection.Upsert(key, map[string]string{"v": "after unlock"}, &gocb.UpsertOptions{Timeout: short})).must(t)
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]string{"v": "after unlock"})
}

func TestLocksReplaceWithTheLockCasSucceedsAndReleasesTheLock(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	locked := res(collection.GetAndLock(key, lockTime, nil)).must(t)
	replaced := res(collection.Replace(key, map[string]int{"v": 2}, &gocb.ReplaceOptions{Cas: locked.Cas()})).must(t)
	if replaced.Cas() == locked.Cas() {
		t.Fatal("replace did not change the CAS")
	}
	res(collection.Upsert(key, map[string]int{"v": 3}, &gocb.UpsertOptions{Timeout: short})).must(t)
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]int{"v": 3})
}

func TestLocksRemoveWithTheLockCasSucceeds(t *testing.T) {
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	locked := res(collection.GetAndLock(key, lockTime, nil)).must(t)
	res(collection.Remove(key, &gocb.RemoveOptions{Cas: locked.Cas()})).must(t)
	_, err := collection.Get(key, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
}

func TestLocksUnlockWithAWrongCasIsCasMismatch(t *testing.T) {
	t.Parallel()
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	locked := res(collection.GetAndLock(key, lockTime, nil)).must(t)
	isError(t, collection.Unlock(key, locked.Cas()+1, nil), gocb.ErrCasMismatch)
	_, err := collection.Upsert(key, map[string]int{"v": 2}, &gocb.UpsertOptions{Timeout: refuse})
	refusedAsLocked(t, err)
	noError(t, collection.Unlock(key, locked.Cas(), nil))
}

func TestLocksALockTimesOut(t *testing.T) {
	t.Parallel()
	key := uniqueKey(t)
	res(collection.Upsert(key, map[string]int{"v": 1}, nil)).must(t)
	res(collection.GetAndLock(key, 2*time.Second, nil)).must(t)
	_, err := collection.Upsert(key, map[string]string{"v": "locked"}, &gocb.UpsertOptions{Timeout: refuse})
	refusedAsLocked(t, err)
	time.Sleep(3 * time.Second)
	res(collection.Upsert(key, map[string]int{"v": 2}, &gocb.UpsertOptions{Timeout: short})).must(t)
	jsonEqual(t, getContent[map[string]any](t, collection, key), map[string]int{"v": 2})
	relocked := res(collection.GetAndLock(key, time.Second, &gocb.GetAndLockOptions{Timeout: short})).must(t)
	jsonEqual(t, contentOf[map[string]any](t, relocked), map[string]int{"v": 2})
	noError(t, collection.Unlock(key, relocked.Cas(), nil))
}

func TestLocksGetAndLockOfAMissingKeyIsDocumentNotFound(t *testing.T) {
	_, err := collection.GetAndLock(uniqueKey(t), lockTime, nil)
	isError(t, err, gocb.ErrDocumentNotFound)
}
