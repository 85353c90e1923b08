// Package compatkv drives the official Go SDK (gocb v2) against a real settee process.
//
// TestMain starts one `settee serve` for the whole package with a fresh data directory and free
// loopback ports (and TLS, with a test CA made by tests/tls/make-certs.sh, for the couchbases://
// tests), prepares it through the CouchDB HTTP API (buckets `default`, `private`,
// `small?q=8`; user alice who may use `default` only; user trudy, only ever sent wrong passwords),
// connects an admin cluster, runs the tests, and stops everything afterwards (the process group,
// then the data directory). SETTEE_CLUSTER=N runs the same tests against an N-node cluster
// (cluster_test.go).
package compatkv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

const (
	// Short enough that an expected timeout costs little, long enough for a loaded CI machine.
	kvTimeout      = 2500 * time.Millisecond
	connectTimeout = 10 * time.Second
	readyTimeout   = 15 * time.Second
)

var (
	admin = gocb.PasswordAuthenticator{Username: "admin", Password: "secret"}
	alice = gocb.PasswordAuthenticator{Username: "alice", Password: "alicepw"}

	srv        *settee
	cluster    *gocb.Cluster
	collection *gocb.Collection
	keyCounter atomic.Int64
)

type settee struct {
	httpPort, kvPort, mgmtPort int
	httpsPort, kvTLSPort       int
	mgmtTLSPort                int
	httpURL, connectionString  string
	tlsConnectionString        string
	// certs holds the test CA (ca.crt) and a CA that signed nothing of the node's (other-ca.crt).
	certs   string
	process *exec.Cmd
	dataDir string
	// peers are the other nodes of a cluster (SETTEE_CLUSTER, cluster_test.go), stopped with
	// this one; dataDir then holds every node's directory.
	peers []*settee
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	gocb.SetLogger(sdkLog)
	var err error
	if size := os.Getenv("SETTEE_CLUSTER"); size != "" {
		srv, err = startCluster(size)
	} else {
		srv, err = startSettee()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting settee:", err)
		return 1
	}
	defer srv.stop()
	cluster, err = srv.connect(admin, kvTimeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connecting:", err)
		return 1
	}
	defer cluster.Close(nil)
	bucket := cluster.Bucket("default")
	if err := waitUntilReady(bucket); err != nil {
		fmt.Fprintln(os.Stderr, "bucket default not ready:", err)
		return 1
	}
	collection = bucket.DefaultCollection()
	return m.Run()
}

func freePort() (int, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port, nil
}

func setteeBinary() string {
	if binary := os.Getenv("SETTEE_BIN"); binary != "" {
		return binary
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache/settee/target/release/settee")
}

// makeCerts makes the test CA and the node's certificate in dir.
func makeCerts(dir string) error {
	if out, err := exec.Command(filepath.Join("..", "..", "tls", "make-certs.sh"), dir).CombinedOutput(); err != nil {
		return fmt.Errorf("making the test certificates: %v: %s", err, out)
	}
	return nil
}

func startSettee() (*settee, error) {
	dataDir, err := os.MkdirTemp("", "settee-compat-kv-go-")
	if err != nil {
		return nil, err
	}
	s := &settee{dataDir: dataDir, certs: filepath.Join(dataDir, "certs")}
	err = s.pickPorts()
	if err == nil {
		err = makeCerts(s.certs)
	}
	if err == nil {
		err = s.launch(filepath.Join(dataDir, "data"), nil, nil, os.Stderr)
	}
	if err == nil {
		err = s.prepare()
	}
	if err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// pickPorts gives the node free ports and the URLs that go with them.
func (s *settee) pickPorts() error {
	for _, port := range []*int{&s.httpPort, &s.kvPort, &s.mgmtPort, &s.httpsPort, &s.kvTLSPort, &s.mgmtTLSPort} {
		var err error
		if *port, err = freePort(); err != nil {
			return err
		}
	}
	s.httpURL = fmt.Sprintf("http://127.0.0.1:%d", s.httpPort)
	s.connectionString = fmt.Sprintf("couchbase://127.0.0.1:%d", s.kvPort)
	s.tlsConnectionString = fmt.Sprintf("couchbases://127.0.0.1:%d", s.kvTLSPort)
	return nil
}

// launch starts the node (in its own process group) with data in data, the plain and TLS doors,
// the given extra arguments and environment (nil: this process's), and waits until it serves.
func (s *settee) launch(data string, extra, env []string, stderr io.Writer) error {
	args := append([]string{"serve", "--data-dir", data,
		"--tls-cert", filepath.Join(s.certs, "node.crt"), "--tls-key", filepath.Join(s.certs, "node.key"),
		"--https-addr", fmt.Sprintf("127.0.0.1:%d", s.httpsPort),
		"--kv-tls-addr", fmt.Sprintf("127.0.0.1:%d", s.kvTLSPort),
		"--mgmt-tls-addr", fmt.Sprintf("127.0.0.1:%d", s.mgmtTLSPort),
		"--http-addr", fmt.Sprintf("127.0.0.1:%d", s.httpPort),
		"--kv-addr", fmt.Sprintf("127.0.0.1:%d", s.kvPort),
		"--mgmt-addr", fmt.Sprintf("127.0.0.1:%d", s.mgmtPort),
		"--admin", "admin:secret", "--pbkdf2-iterations", "1000"}, extra...)
	s.process = exec.Command(setteeBinary(), args...)
	s.process.Env = env
	s.process.Stderr = stderr
	s.process.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.process.Start(); err != nil {
		s.process = nil
		return err
	}
	return s.waitUp()
}

func (s *settee) waitUp() error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		response, err := http.Get(s.httpURL + "/_up")
		if err == nil {
			response.Body.Close()
			if response.StatusCode == 200 {
				conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.kvPort), 2*time.Second)
				if err == nil {
					conn.Close()
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("settee did not come up")
}

type step struct {
	method, path string
	body         any
	statuses     []int
}

// accounts are the users prepare makes (once for a cluster: `_users` has a copy on every
// node).
var accounts = []step{
	{"PUT", "/_users/org.couchdb.user:alice",
		map[string]any{"name": "alice", "password": "alicepw", "roles": []string{}, "type": "user"},
		[]int{201, 202}},
	// Only ever sent wrong passwords (auth_test.go): gocb retries a refused login until its
	// timeout, and repeated failures lock a user out (CouchDB's [chttpd_auth_lockout]), so
	// they must not be the admin's.
	{"PUT", "/_users/org.couchdb.user:trudy",
		map[string]any{"name": "trudy", "password": "trudypw", "roles": []string{}, "type": "user"},
		[]int{201, 202}},
}

func (s *settee) prepare() error {
	steps := []step{
		{"PUT", "/default", nil, []int{201}},
		{"PUT", "/private", nil, []int{201}},
		{"PUT", "/small?q=8", nil, []int{201}},
	}
	steps = append(steps, accounts...)
	steps = append(steps, step{"PUT", "/default/_security", map[string]any{
		"admins":  map[string]any{"names": []string{}, "roles": []string{}},
		"members": map[string]any{"names": []string{"alice"}, "roles": []string{}},
	}, []int{200}})
	return s.do(steps)
}

// do sends the steps in order and fails on the first answered with an unexpected status.
func (s *settee) do(steps []step) error {
	for _, step := range steps {
		status, body, err := s.http(step.method, step.path, step.body)
		if err != nil {
			return err
		}
		ok := false
		for _, expected := range step.statuses {
			ok = ok || status == expected
		}
		if !ok {
			return fmt.Errorf("%s %s answered %d: %s", step.method, step.path, status, body)
		}
	}
	return nil
}

func (s *settee) stop() {
	for _, peer := range s.peers {
		peer.stop()
	}
	if s.process != nil && s.process.Process != nil {
		pgid := s.process.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
	}
	os.RemoveAll(s.dataDir)
}

// http sends one request to the CouchDB door as the admin; body nil means no body.
// logsIn reports whether name:password logs in on the node's HTTP door.
func (s *settee) logsIn(name, password string) bool {
	request, err := http.NewRequest("GET", s.httpURL+"/_session", nil)
	if err != nil {
		return false
	}
	request.SetBasicAuth(name, password)
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return false
	}
	defer response.Body.Close()
	var session struct {
		UserCtx struct {
			Name *string `json:"name"`
		} `json:"userCtx"`
	}
	if response.StatusCode != 200 || json.NewDecoder(response.Body).Decode(&session) != nil {
		return false
	}
	return session.UserCtx.Name != nil && *session.UserCtx.Name == name
}

func (s *settee) http(method, path string, body any) (int, []byte, error) {
	var reader io.Reader
	if body != nil {
		encoded, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		reader = bytes.NewReader(encoded)
	}
	request, err := http.NewRequest(method, s.httpURL+path, reader)
	if err != nil {
		return 0, nil, err
	}
	request.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("admin:secret")))
	if body != nil {
		request.Header.Set("Content-Type", "application/json")
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return 0, nil, err
	}
	defer response.Body.Close()
	raw, err := io.ReadAll(response.Body)
	return response.StatusCode, raw, err
}

func (s *settee) connect(user gocb.PasswordAuthenticator, kv time.Duration) (*gocb.Cluster, error) {
	return gocb.Connect(s.connectionString, gocb.ClusterOptions{
		Authenticator:  user,
		TimeoutsConfig: gocb.TimeoutsConfig{ConnectTimeout: connectTimeout, KVTimeout: kv},
	})
}

func waitUntilReady(bucket *gocb.Bucket) error {
	return bucket.WaitUntilReady(readyTimeout, &gocb.WaitUntilReadyOptions{
		ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeKeyValue},
	})
}

// uniqueKey returns a document id unique to the test.
func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("go::%s::%d::%d", t.Name(), time.Now().UnixNano(), keyCounter.Add(1))
}

// outcome carries an SDK call's (value, error) pair so a test can write res(call()).must(t).
type outcome[T any] struct {
	value T
	err   error
}

func res[T any](value T, err error) outcome[T] { return outcome[T]{value, err} }

func (o outcome[T]) must(t *testing.T) T {
	t.Helper()
	if o.err != nil {
		t.Fatalf("unexpected error: %v", o.err)
	}
	return o.value
}

func noError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// isError fails the test unless err matches target (errors.Is through the SDK's wrappers).
func isError(t *testing.T, err error, target error) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected %v, got success", target)
	}
	if !errors.Is(err, target) {
		t.Fatalf("expected %v, got %v", target, err)
	}
}

func contentOf[T any](t *testing.T, result *gocb.GetResult) T {
	t.Helper()
	var value T
	noError(t, result.Content(&value))
	return value
}

func getContent[T any](t *testing.T, c *gocb.Collection, key string) T {
	t.Helper()
	return contentOf[T](t, res(c.Get(key, nil)).must(t))
}

func jsonEqual(t *testing.T, got, want any) {
	t.Helper()
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("got %s, want %s", gotJSON, wantJSON)
	}
}

func exists(t *testing.T, c *gocb.Collection, key string) bool {
	t.Helper()
	return res(c.Exists(key, nil)).must(t).Exists()
}
