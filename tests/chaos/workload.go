package main

// The workload: concurrent gocb clients reading and writing a few keys, each operation recorded
// with its invocation and return time for porcupine.
//
// Each client has its own gocb.Cluster, as separate application processes would: its own
// connections and its own copy of the cluster map, so one client's stale map is not repaired
// by another's refresh and the clients see a failover at different moments.
//
// Operations: Get; Upsert of a unique value with majority durability; and a CAS write, a Get
// followed by Replace with the CAS it returned (or Insert when the key was absent), of a unique
// value with majority durability. How each SDK answer is classified is in classify.

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/couchbase/gocb/v2"
)

// recorder collects the operations of one run, timed on one monotonic clock.
type recorder struct {
	start time.Time
	// mu guards ops and counts: every client appends.
	mu     sync.Mutex
	ops    []porcupine.Operation
	counts map[string]*[4]int // per operation name: ok, failed, ambiguous, errors (reads)
}

const (
	countOK = iota
	countFailed
	countAmbiguous
	countReadError
)

func newRecorder() *recorder {
	return &recorder{start: time.Now(), counts: map[string]*[4]int{}}
}

func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *recorder) count(name string, class int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts[name] == nil {
		r.counts[name] = &[4]int{}
	}
	r.counts[name][class]++
}

func (r *recorder) add(client int, in kvInput, out kvOutput, call, ret int64) {
	if out.Outcome == outUnknown {
		ret = math.MaxInt64 // made the end of the history in history()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

// history returns the operations, each ambiguous one returning after everything else, with
// client ids renumbered densely (the visualisation draws one row per id).
func (r *recorder) history() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var end int64
	for _, op := range r.ops {
		if op.Return != math.MaxInt64 && op.Return > end {
			end = op.Return
		}
		if op.Call > end {
			end = op.Call
		}
	}
	dense := map[int]int{}
	history := make([]porcupine.Operation, len(r.ops))
	for i, op := range r.ops {
		if op.Return == math.MaxInt64 {
			op.Return = end + 1
		}
		if _, seen := dense[op.ClientId]; !seen {
			dense[op.ClientId] = len(dense)
		}
		op.ClientId = dense[op.ClientId]
		history[i] = op
	}
	return history
}

// keySet is the keys the clients use now; the nemesis moves them to a new generation every
// few rounds, which bounds how many ambiguous operations one key's history holds (porcupine's
// search grows exponentially with those), while every generation is read back at the end.
type keySet struct {
	current atomic.Pointer[[]string]
	// mu guards all: the keys of every generation so far.
	mu  sync.Mutex
	all []string
}

// rotate moves the clients to generation gen: count keys on distinct vbuckets.
func (k *keySet) rotate(gen, count, vbuckets int) {
	keys := make([]string, 0, count)
	used := map[int]bool{}
	for i := 0; len(keys) < count; i++ {
		key := fmt.Sprintf("chaos-g%d-k%d", gen, i)
		vb := vbucketOf(key, vbuckets)
		if used[vb] && len(used) < vbuckets {
			continue
		}
		used[vb] = true
		keys = append(keys, key)
	}
	k.mu.Lock()
	k.all = append(k.all, keys...)
	k.mu.Unlock()
	k.current.Store(&keys)
}

func (k *keySet) everyKey() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.all...)
}

// wedgedAfter: a client whose last this many operations all failed or were ambiguous
// reconnects (a fresh gocb.Cluster), as an application would restart a wedged SDK instance.
// gocbcore v10.8.1 can deadlock one: a NOT_MY_VBUCKET whose config drops the answering node
// makes that connection's reader wait for itself (kvMux.handleNotMyVbucket -> pipelineTakeover
// -> memdClient.closeConn), and the instance then times out every operation for good.
const wedgedAfter = 3

// worker is one client.
type worker struct {
	index      int
	clients    int // how many workers there are: process ids advance by this much
	process    int // porcupine ClientId; a new one after each ambiguous operation
	connection string
	cluster    *gocb.Cluster
	collection *gocb.Collection
	rec        *recorder
	rng        *rand.Rand
	kvTimeout  time.Duration
	written    int
	failing    int // operations in a row that failed or were ambiguous
}

// connect opens a gocb cluster on every node's KV door and waits until the bucket serves KV.
func connect(connection string, kvTimeout time.Duration) (*gocb.Cluster, *gocb.Collection, error) {
	c, err := gocb.Connect(connection, gocb.ClusterOptions{
		Authenticator: gocb.PasswordAuthenticator{Username: adminUser, Password: adminPass},
		TimeoutsConfig: gocb.TimeoutsConfig{
			ConnectTimeout: 10 * time.Second, KVTimeout: kvTimeout, KVDurableTimeout: kvTimeout,
		},
	})
	if err != nil {
		return nil, nil, err
	}
	bucket := c.Bucket(bucketName)
	err = bucket.WaitUntilReady(30*time.Second, &gocb.WaitUntilReadyOptions{
		ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeKeyValue},
	})
	if err != nil {
		_ = c.Close(nil)
		return nil, nil, err
	}
	return c, bucket.DefaultCollection(), nil
}

// closeSoon closes a gocb cluster without waiting more than a few seconds: a wedged instance
// never finishes closing (see wedgedAfter), and the test must not hang on it.
func closeSoon(c *gocb.Cluster) {
	done := make(chan struct{})
	go func() {
		_ = c.Close(nil)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		logf("a gocb cluster did not close within 5 s; left behind")
	}
}

// run issues operations until ctx ends: 40% reads, 30% upserts, 30% CAS writes.
func (w *worker) run(ctx context.Context, keys *keySet) {
	defer func() {
		if w.cluster != nil {
			closeSoon(w.cluster)
		}
	}()
	for ctx.Err() == nil {
		if w.collection == nil || w.failing >= wedgedAfter {
			if w.reconnect(); w.collection == nil {
				continue
			}
		}
		current := *keys.current.Load()
		key := current[w.rng.IntN(len(current))]
		switch pick := w.rng.IntN(10); {
		case pick < 4:
			w.get(key)
		case pick < 7:
			w.upsert(key)
		default:
			w.casWrite(key)
		}
	}
}

// reconnect replaces the client's gocb cluster with a fresh one; the old one is closed in the
// background, since a wedged one never finishes closing.
func (w *worker) reconnect() {
	logf("client %d: %d operations in a row failed; reconnecting", w.index, w.failing)
	w.rec.count("reconnect", countOK)
	if old := w.cluster; old != nil {
		go func() { _ = old.Close(nil) }()
	}
	cluster, collection, err := connect(w.connection, w.kvTimeout)
	if err != nil {
		logf("client %d: reconnecting: %v", w.index, err)
		w.cluster, w.collection = nil, nil
		time.Sleep(time.Second)
		return
	}
	w.cluster, w.collection, w.failing = cluster, collection, 0
}

// nextValue is a value no other write of the run stores.
func (w *worker) nextValue() string {
	w.written++
	return fmt.Sprintf("w%d-%d", w.index, w.written)
}

// get reads key and records the read if it succeeded (a failed read observed nothing).
func (w *worker) get(key string) (value string, cas gocb.Cas, ok bool) {
	call := w.rec.now()
	result, err := w.collection.Get(key, &gocb.GetOptions{Timeout: w.kvTimeout})
	ret := w.rec.now()
	switch {
	case err == nil:
		if err := result.Content(&value); err != nil {
			w.rec.count("get", countReadError)
			return "", 0, false
		}
		cas = result.Cas()
	case errors.Is(err, gocb.ErrDocumentNotFound):
	default:
		w.failing++
		w.rec.count("get", countReadError)
		return "", 0, false
	}
	w.failing = 0
	w.rec.count("get", countOK)
	w.rec.add(w.process, kvInput{Kind: opGet, Key: key}, kvOutput{Outcome: outOK, Value: value}, call, ret)
	return value, cas, true
}

func (w *worker) upsert(key string) {
	value := w.nextValue()
	call := w.rec.now()
	_, err := w.collection.Upsert(key, value, &gocb.UpsertOptions{
		DurabilityLevel: gocb.DurabilityLevelMajority, Timeout: w.kvTimeout,
	})
	w.record("upsert", kvInput{Kind: opUpsert, Key: key, Value: value}, classify(err), call, w.rec.now())
}

// casWrite reads key, then replaces the value read under its CAS (inserts when absent).
func (w *worker) casWrite(key string) {
	expected, cas, ok := w.get(key)
	if !ok {
		return
	}
	value := w.nextValue()
	in := kvInput{Kind: opCAS, Key: key, Value: value, Expected: expected}
	call := w.rec.now()
	var err error
	if expected == "" {
		_, err = w.collection.Insert(key, value, &gocb.InsertOptions{
			DurabilityLevel: gocb.DurabilityLevelMajority, Timeout: w.kvTimeout,
		})
		w.record("insert", in, classify(err), call, w.rec.now())
		return
	}
	_, err = w.collection.Replace(key, value, &gocb.ReplaceOptions{
		Cas: cas, DurabilityLevel: gocb.DurabilityLevelMajority, Timeout: w.kvTimeout,
	})
	w.record("replace", in, classify(err), call, w.rec.now())
}

func (w *worker) record(name string, in kvInput, out outcome, call, ret int64) {
	w.rec.add(w.process, in, kvOutput{Outcome: out}, call, ret)
	failing := w.failing
	w.failing = 0 // the server answered, unless the outcome is unknown
	switch out {
	case outUnknown:
		w.failing = failing + 1
		w.rec.count(name, countAmbiguous)
		// As Jepsen does with a crashed process: the operation stays open to the end of the
		// history, so the client goes on under a new id.
		w.process += w.clients
		// Do not hammer a cluster in trouble.
		time.Sleep(50 * time.Millisecond)
	case outFailed:
		w.rec.count(name, countFailed)
		time.Sleep(50 * time.Millisecond)
	case outOK:
		w.rec.count(name, countOK)
	default:
		w.rec.count(name, countFailed) // a definite refusal that observed the value
	}
}

// classify says what an SDK answer to a write means for the document. Only answers that
// settee and gocb give when the write was not applied are definite:
//   - ErrCasMismatch / ErrDocumentNotFound (Replace), ErrDocumentExists (Insert): the memcached
//     engine checks the CAS or the document's existence before it stores anything, and gocb
//     retries a mutation only after answers that mean it was not executed (NOT_MY_VBUCKET,
//     temporary failures), never after a dropped connection or a timeout;
//   - ErrDurabilityImpossible and ErrDurableWriteInProgress: settee refuses the sync write
//     before writing it (crates/kv/src/sync_write.rs), as Couchbase Server does.
//
// Everything else — timeouts (gocb calls every mutation timeout ambiguous),
// ErrDurabilityAmbiguous, canceled requests after a dropped connection, errors we did not
// expect — is ambiguous.
func classify(err error) outcome {
	switch {
	case err == nil:
		return outOK
	case errors.Is(err, gocb.ErrCasMismatch):
		return outMismatch
	case errors.Is(err, gocb.ErrDocumentNotFound):
		return outNotFound
	case errors.Is(err, gocb.ErrDocumentExists):
		return outExists
	case errors.Is(err, gocb.ErrDurabilityImpossible), errors.Is(err, gocb.ErrDurableWriteInProgress):
		return outFailed
	default:
		return outUnknown
	}
}

// finalReads reads every key once more after healing, retrying until a read succeeds, and
// records the successful read; it returns each key's value.
func finalReads(ctx context.Context, collection *gocb.Collection, rec *recorder, client int, keys []string, kvTimeout time.Duration) (map[string]string, error) {
	final := map[string]string{}
	w := &worker{process: client, collection: collection, rec: rec, kvTimeout: kvTimeout}
	for _, key := range keys {
		deadline := time.Now().Add(60 * time.Second)
		for {
			value, _, ok := w.get(key)
			if ok {
				final[key] = value
				break
			}
			if time.Now().After(deadline) {
				return final, fmt.Errorf("no read of %s succeeded within a minute of healing", key)
			}
			if !sleep(ctx, 200*time.Millisecond) {
				return final, ctx.Err()
			}
		}
	}
	return final, nil
}

// vbucketOf is Couchbase's vbucket of a key: CRC32 (IEEE) of the key, bits 16-30, modulo the
// number of vbuckets.
func vbucketOf(key string, vbuckets int) int {
	return int((crc32.ChecksumIEEE([]byte(key))>>16)&0x7fff) % vbuckets
}
