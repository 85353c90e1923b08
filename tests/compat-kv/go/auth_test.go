package compatkv

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// Authentication and bucket access: wrong passwords are refused; alice may use `default` only.
//
// gocb connects lazily and keeps retrying a refused connection until the operation's timeout, so
// what the application sees is WaitUntilReady / the operation timing out. Why it failed is in the
// SDK's log: the tests capture it to check that the server refused the SASL authentication (or
// the SELECT_BUCKET) rather than, say, never answering.

const (
	readyRefused = 2 * time.Second
	opRefused    = time.Second
)

// capturingLogger records the SDK's log lines while capturing is on and drops them otherwise.
// It is installed once (gocb's logger is global) by TestMain.
type capturingLogger struct {
	mutex     sync.Mutex
	capturing bool
	lines     []string
}

var sdkLog = &capturingLogger{}

func (l *capturingLogger) Log(_ gocb.LogLevel, _ int, format string, v ...interface{}) error {
	l.mutex.Lock()
	defer l.mutex.Unlock()
	if l.capturing {
		l.lines = append(l.lines, fmt.Sprintf(format, v...))
	}
	return nil
}

// capture runs body with the SDK's log captured and returns the lines logged meanwhile. Tests
// using it do not run in parallel with each other.
func (l *capturingLogger) capture(body func()) []string {
	l.mutex.Lock()
	l.capturing, l.lines = true, nil
	l.mutex.Unlock()
	defer func() {
		l.mutex.Lock()
		l.capturing = false
		l.mutex.Unlock()
	}()
	body()
	l.mutex.Lock()
	defer l.mutex.Unlock()
	return append([]string(nil), l.lines...)
}

func logContains(lines []string, text string) bool {
	for _, line := range lines {
		if strings.Contains(line, text) {
			return true
		}
	}
	return false
}

func refusedAtBucketOpen(t *testing.T, user gocb.PasswordAuthenticator, bucketName string) []string {
	t.Helper()
	return sdkLog.capture(func() {
		c := res(srv.connect(user, kvTimeout)).must(t)
		defer c.Close(nil)
		bucket := c.Bucket(bucketName)
		if err := bucket.WaitUntilReady(readyRefused, nil); err == nil {
			t.Fatalf("bucket %s became ready for %s", bucketName, user.Username)
		}
		if _, err := bucket.DefaultCollection().Upsert(uniqueKey(t), map[string]string{"by": user.Username},
			&gocb.UpsertOptions{Timeout: opRefused}); err == nil {
			t.Fatalf("%s wrote to %s", user.Username, bucketName)
		}
	})
}

func TestAuthAWrongPasswordIsRefused(t *testing.T) {
	// trudy, not the admin: the retries would lock the admin out (see main_test.go).
	log := refusedAtBucketOpen(t, gocb.PasswordAuthenticator{Username: "trudy", Password: "not-the-password"}, "default")
	if !logContains(log, "Failed to perform auth against server (authentication failure") {
		t.Fatalf("the SDK did not log an authentication failure: %q", log)
	}
}

func TestAuthAnUnknownUserIsRefused(t *testing.T) {
	log := refusedAtBucketOpen(t, gocb.PasswordAuthenticator{Username: "mallory", Password: "secret"}, "default")
	if !logContains(log, "Failed to perform auth against server (authentication failure") {
		t.Fatalf("the SDK did not log an authentication failure: %q", log)
	}
}

func TestAuthAliceCanUseDefault(t *testing.T) {
	c := res(srv.connect(alice, kvTimeout)).must(t)
	defer c.Close(nil)
	bucket := c.Bucket("default")
	noError(t, waitUntilReady(bucket))
	coll := bucket.DefaultCollection()
	key := uniqueKey(t)
	cas := res(coll.Upsert(key, map[string]string{"by": "alice"}, nil)).must(t).Cas()
	result := res(coll.Get(key, nil)).must(t)
	jsonEqual(t, contentOf[map[string]any](t, result), map[string]string{"by": "alice"})
	if result.Cas() != cas {
		t.Fatal("get CAS differs from the upsert CAS")
	}
}

func TestAuthAliceCannotUsePrivate(t *testing.T) {
	key := uniqueKey(t)
	res(cluster.Bucket("private").DefaultCollection().Upsert(key, map[string]bool{"secret": true}, nil)).must(t)
	// Couchbase answers a bucket the user may not access exactly like a missing bucket:
	// SELECT_BUCKET -> EACCESS, which gocb reports as an authentication failure.
	for _, bucketName := range []string{"private", "no-such-bucket"} {
		log := refusedAtBucketOpen(t, alice, bucketName)
		if !logContains(log, "Failed to perform select bucket against server (authentication failure") {
			t.Fatalf("%s: the SDK did not log a refused SELECT_BUCKET: %q", bucketName, log)
		}
		if !logContains(log, "Authenticated successfully") {
			t.Fatalf("%s: alice's SASL authentication itself should succeed: %q", bucketName, log)
		}
	}
	// The admin's document is untouched and the admin can still use the bucket.
	jsonEqual(t, getContent[map[string]any](t, cluster.Bucket("private").DefaultCollection(), key), map[string]bool{"secret": true})
}
