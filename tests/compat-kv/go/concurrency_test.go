package compatkv

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// Many operations in flight at once, every value checked.

const concurrentCount = 2000

// inFlightMax stays under gocbcore's per-connection request queue (2048 by default), which
// otherwise fails requests client-side with "queue overflowed" before they reach the server.
const inFlightMax = 1000

// parallel runs op(n) for every n in [0, count), up to inFlightMax at once, and returns the
// first error.
func parallel(count int, op func(n int) error) error {
	var wait sync.WaitGroup
	errs := make(chan error, count)
	slots := make(chan struct{}, inFlightMax)
	for n := 0; n < count; n++ {
		wait.Add(1)
		slots <- struct{}{}
		go func(n int) {
			defer wait.Done()
			defer func() { <-slots }()
			if err := op(n); err != nil {
				errs <- err
			}
		}(n)
	}
	wait.Wait()
	close(errs)
	return <-errs
}

func TestConcurrency2000UpsertsAndGets(t *testing.T) {
	c := res(srv.connect(admin, 20*time.Second)).must(t)
	defer c.Close(nil)
	bucket := c.Bucket("default")
	noError(t, waitUntilReady(bucket))
	coll := bucket.DefaultCollection()
	prefix := uniqueKey(t)
	keys := make([]string, concurrentCount)
	for n := range keys {
		keys[n] = fmt.Sprintf("%s::%d", prefix, n)
	}
	casByKey := make([]gocb.Cas, concurrentCount)
	noError(t, parallel(concurrentCount, func(n int) error {
		result, err := coll.Upsert(keys[n], map[string]any{"n": n, "key": keys[n]}, nil)
		if err == nil {
			casByKey[n] = result.Cas()
		}
		return err
	}))
	noError(t, parallel(concurrentCount, func(n int) error {
		result, err := coll.Get(keys[n], nil)
		if err != nil {
			return err
		}
		var value struct {
			N   int    `json:"n"`
			Key string `json:"key"`
		}
		if err := result.Content(&value); err != nil {
			return err
		}
		if value.N != n || value.Key != keys[n] || result.Cas() != casByKey[n] {
			return fmt.Errorf("%s: got %+v CAS %d, want n=%d CAS %d", keys[n], value, result.Cas(), n, casByKey[n])
		}
		return nil
	}))
	// Mixed reads and writes of the same keys at once: every write lands exactly once.
	noError(t, parallel(2*concurrentCount, func(n int) error {
		if n < concurrentCount {
			_, err := coll.Upsert(keys[n], map[string]any{"n": n * 2, "key": keys[n]}, nil)
			return err
		}
		_, err := coll.Exists(keys[n-concurrentCount], nil)
		return err
	}))
	noError(t, parallel(concurrentCount, func(n int) error {
		var value struct {
			N int `json:"n"`
		}
		result, err := coll.Get(keys[n], nil)
		if err != nil {
			return err
		}
		if err := result.Content(&value); err != nil {
			return err
		}
		if value.N != n*2 {
			return fmt.Errorf("%s: n=%d, want %d", keys[n], value.N, n*2)
		}
		return nil
	}))
}
