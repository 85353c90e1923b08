package compatkv

// Cluster mode (SETTEE_CLUSTER=N): the same tests against N settee nodes. Node 1 makes the
// cluster, the others join it one at a time; each node gets the single node's TLS doors (one test
// CA for all), its own free ports and directory and its own process group. Once every node lists
// N members, prepare() runs on node 1; then every node must log alice in (accounts are the
// cluster's) and serve every database. The tests get node 1 as srv (its HTTP door) with
// connection strings that list every node's KV (and KV TLS) door.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

const clusterReadyTimeout = 60 * time.Second

func startCluster(size string) (*settee, error) {
	n, err := strconv.Atoi(size)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("SETTEE_CLUSTER=%q is not a node count", size)
	}
	root, err := os.MkdirTemp("", "settee-compat-kv-go-cluster-")
	if err != nil {
		return nil, err
	}
	first := &settee{dataDir: root}
	if err := first.startNodes(n); err != nil {
		first.stop()
		return nil, err
	}
	return first, nil
}

// startNodes starts n nodes: s (node 1, its dataDir already made) and n-1 peers joining it.
func (s *settee) startNodes(n int) error {
	certs := filepath.Join(s.dataDir, "certs")
	if err := makeCerts(certs); err != nil {
		return err
	}
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	env := append(os.Environ(), "SETTEE_CLUSTER_SECRET="+base64.StdEncoding.EncodeToString(secret))
	var join string
	var kv, kvTLS []string
	for k := 1; k <= n; k++ {
		node := s
		if k > 1 {
			node = &settee{}
			s.peers = append(s.peers, node)
		}
		node.certs = certs
		if err := node.pickPorts(); err != nil {
			return err
		}
		clusterPort, err := freePort()
		if err != nil {
			return err
		}
		extra := []string{"--cluster-addr", fmt.Sprintf("127.0.0.1:%d", clusterPort)}
		if join != "" {
			extra = append(extra, "--join", join)
		} else {
			join = extra[1]
		}
		data := filepath.Join(s.dataDir, fmt.Sprintf("node%d", k))
		if err := node.launch(data, extra, env, &prefixWriter{prefix: fmt.Sprintf("[node%d] ", k)}); err != nil {
			return fmt.Errorf("node%d: %w", k, err)
		}
		kv = append(kv, fmt.Sprintf("127.0.0.1:%d", node.kvPort))
		kvTLS = append(kvTLS, fmt.Sprintf("127.0.0.1:%d", node.kvTLSPort))
	}
	nodes := append([]*settee{s}, s.peers...)
	if err := waitForEvery(nodes, "the cluster map to list every member", func(node *settee) bool {
		var view struct {
			Members []struct{ State string } `json:"members"`
		}
		status, body, err := node.http("GET", "/_node/_local/_cluster", nil)
		if err != nil || status != 200 || json.Unmarshal(body, &view) != nil || len(view.Members) != n {
			return false
		}
		for _, member := range view.Members {
			if member.State != "active" {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	if err := s.prepare(); err != nil {
		return err
	}
	// Accounts are the cluster's: made through the first node, they reach every node's copy
	// of `_users` (trudy is only ever refused, so she need not have arrived).
	if err := waitForEvery(nodes, "alice to log in", func(node *settee) bool {
		return node.logsIn("alice", "alicepw")
	}); err != nil {
		return err
	}
	for _, db := range []string{"default", "private", "small"} {
		if err := waitForEvery(nodes, "database "+db, func(node *settee) bool {
			status, _, err := node.http("GET", "/"+db, nil)
			return err == nil && status == 200
		}); err != nil {
			return err
		}
	}
	s.connectionString = "couchbase://" + strings.Join(kv, ",")
	s.tlsConnectionString = "couchbases://" + strings.Join(kvTLS, ",")
	return nil
}

// waitForEvery polls until ready holds on every node.
func waitForEvery(nodes []*settee, what string, ready func(*settee) bool) error {
	deadline := time.Now().Add(clusterReadyTimeout)
	for i, node := range nodes {
		for !ready(node) {
			if time.Now().After(deadline) {
				return fmt.Errorf("node%d: timed out waiting for %s", i+1, what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// prefixWriter copies a node's log to stderr line by line, each line marked with the node.
type prefixWriter struct {
	prefix  string
	mu      sync.Mutex
	pending []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, p...)
	for {
		end := bytes.IndexByte(w.pending, '\n')
		if end < 0 {
			return len(p), nil
		}
		fmt.Fprintf(os.Stderr, "%s%s", w.prefix, w.pending[:end+1])
		w.pending = w.pending[end+1:]
	}
}
