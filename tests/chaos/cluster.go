package main

// The test harness: a 3-node settee cluster on loopback, started the way scripts/cluster starts
// one, and the REST calls the test makes on it: the cluster map (`/_node/_local/_cluster` on the
// CouchDB door), the bucket's terse config with its vbucket map (`/pools/default/b/db` on the
// management door), bucket creation, the auto-failover timeout and re-adding a failed-over node.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	bucketName = "db"
	adminUser  = "admin"
	adminPass  = "secret"
	// requestTimeout bounds every REST call, so a stopped node costs a little time, not a hang.
	requestTimeout = 3 * time.Second
	// bucketReadyTimeout bounds how long a new bucket may take to open on every node.
	bucketReadyTimeout = 30 * time.Second
)

// cluster is a set of settee nodes sharing a secret, with their data under root.
type cluster struct {
	root   string
	nodes  []*node
	client *http.Client
	// vbuckets of the bucket once created.
	vbuckets int
}

// clustersStarted numbers clusters, for the names of their network interfaces.
var clustersStarted int

// startCluster starts size nodes: the first makes the cluster, the others join it in turn.
// With private, each node runs in a network namespace of its own (netns.go), where partitions
// can reach it; otherwise all of them listen on loopback.
func startCluster(ctx context.Context, binary string, size int, private bool) (*cluster, error) {
	root, err := os.MkdirTemp("", "settee-chaos-")
	if err != nil {
		return nil, err
	}
	theReaper.addDir(root)
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	c := &cluster{root: root, client: &http.Client{Timeout: requestTimeout}}
	ports, err := freePorts(4 * size)
	if err != nil {
		return nil, err
	}
	clustersStarted++
	for i := 0; i < size; i++ {
		address := func(slot int) string { return fmt.Sprintf("127.0.0.1:%d", ports[4*i+slot]) }
		var ns *netns
		if private {
			// A namespace of its own: the same well-known ports on every node.
			if ns, err = newNetns(clustersStarted, i+1); err != nil {
				c.close()
				return nil, err
			}
			address = func(slot int) string {
				return fmt.Sprintf("%s:%d", ns.addr, [4]int{5984, 11210, 8091, 4369}[slot])
			}
		}
		n := &node{ns: ns,
			index: i + 1, dir: filepath.Join(root, fmt.Sprintf("node%d", i+1)),
			binary: binary, secret: base64.StdEncoding.EncodeToString(secret),
			httpAddr: address(0), kvAddr: address(1), mgmtAddr: address(2), clusterAddr: address(3),
		}
		n.args = []string{"serve", "--data-dir", filepath.Join(n.dir, "data"),
			"--http-addr", n.httpAddr, "--kv-addr", n.kvAddr, "--mgmt-addr", n.mgmtAddr,
			"--admin", adminUser + ":" + adminPass, "--cluster-addr", n.clusterAddr}
		if i > 0 {
			n.args = append(n.args, "--join", c.nodes[0].clusterAddr)
		}
		c.nodes = append(c.nodes, n)
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			c.close()
			return nil, err
		}
		if err := n.start(ctx); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// close kills every node, removes its network namespace and removes the data.
func (c *cluster) close() {
	for _, n := range c.nodes {
		n.kill9()
		if n.ns != nil {
			n.ns.remove()
		}
	}
	_ = os.RemoveAll(c.root)
}

// saveLogs copies each node's log into dir (for a failed run's report).
func (c *cluster) saveLogs(dir string) {
	_ = os.MkdirAll(dir, 0o755)
	for _, n := range c.nodes {
		if data, err := os.ReadFile(n.logPath()); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("node%d.log", n.index)), data, 0o644)
		}
	}
}

// connectionString lists every node's KV door, so that bootstrap survives a dead node.
func (c *cluster) connectionString() string {
	addresses := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addresses[i] = n.kvAddr
	}
	return "couchbase://" + strings.Join(addresses, ",")
}

func (c *cluster) nodeByID(id uint64) *node {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// request sends an admin request; form, if not nil, is the form-encoded body.
func (c *cluster) request(method, target string, form url.Values) (int, []byte, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(adminUser, adminPass)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

func (c *cluster) getJSON(target string, into any) error {
	status, raw, err := c.request("GET", target, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", target, status, raw)
	}
	return json.Unmarshal(raw, into)
}

// clusterStatus is a node's view of the cluster map (`GET /_node/_local/_cluster`).
type clusterStatus struct {
	Node     uint64   `json:"node"`
	State    string   `json:"state"` // this node's Raft state: leader, follower, learner...
	Leader   uint64   `json:"leader"`
	Term     uint64   `json:"term"`
	Revision uint64   `json:"revision"`
	Voters   []uint64 `json:"voters"`
	Members  []struct {
		ID       uint64 `json:"id"`
		Name     string `json:"name"`
		State    string `json:"state"` // active, failed, ejected
		Role     string `json:"role"`
		KVAddr   string `json:"kv_addr"`
		MgmtAddr string `json:"mgmt_addr"`
	} `json:"members"`
	Buckets []struct {
		Name     string         `json:"name"`
		VBuckets int            `json:"vbuckets"`
		Replicas int            `json:"replicas"`
		Actives  map[string]int `json:"actives"`
	} `json:"buckets"`
}

// memberState returns a member's state in this view ("" if it is not a member).
func (s *clusterStatus) memberState(id uint64) string {
	for _, m := range s.Members {
		if m.ID == id {
			return m.State
		}
	}
	return ""
}

// activeVBuckets is how many active vbuckets of the bucket the map gives node id.
func (s *clusterStatus) activeVBuckets(id uint64) int {
	for _, b := range s.Buckets {
		if b.Name == bucketName {
			return b.Actives[strconv.FormatUint(id, 10)]
		}
	}
	return 0
}

func (c *cluster) status(n *node) (*clusterStatus, error) {
	var s clusterStatus
	err := c.getJSON("http://"+n.httpAddr+"/_node/_local/_cluster", &s)
	return &s, err
}

// leaderView is the map as the Raft leader sees it, and the leader's node. With two nodes
// claiming leadership for a moment (an old leader just continued), the higher term wins.
func (c *cluster) leaderView() (*clusterStatus, *node, error) {
	var best *clusterStatus
	var bestNode *node
	for _, n := range c.nodes {
		if !n.reachable() {
			continue
		}
		s, err := c.status(n)
		if err != nil || s.State != "leader" {
			continue
		}
		if best == nil || s.Term > best.Term {
			best, bestNode = s, n
		}
	}
	if best == nil {
		return nil, nil, errors.New("no node says it leads the cluster")
	}
	return best, bestNode, nil
}

// terseConfig is the part of the bucket's terse config the test reads.
type terseConfig struct {
	Rev              int `json:"rev"`
	VBucketServerMap struct {
		NumReplicas int      `json:"numReplicas"`
		ServerList  []string `json:"serverList"`
		VBucketMap  [][]int  `json:"vBucketMap"`
	} `json:"vBucketServerMap"`
}

func (c *cluster) terse(n *node) (*terseConfig, error) {
	var t terseConfig
	err := c.getJSON("http://"+n.mgmtAddr+"/pools/default/b/"+bucketName, &t)
	return &t, err
}

// activeVBucketsOf lists the vbuckets whose active is n in the terse config t.
func (t *terseConfig) activeVBucketsOf(n *node) []int {
	var vbuckets []int
	for vb, row := range t.VBucketServerMap.VBucketMap {
		if len(row) > 0 && row[0] >= 0 && row[0] < len(t.VBucketServerMap.ServerList) &&
			t.VBucketServerMap.ServerList[row[0]] == n.kvAddr {
			vbuckets = append(vbuckets, vb)
		}
	}
	return vbuckets
}

// createBucket makes the bucket with replicas replicas and vbuckets vbuckets and waits until
// every node serves it.
func (c *cluster) createBucket(ctx context.Context, vbuckets, replicas int) error {
	target := fmt.Sprintf("http://%s/%s?n=%d&q=%d", c.nodes[0].httpAddr, bucketName, replicas+1, vbuckets)
	status, raw, err := c.request("PUT", target, nil)
	if err != nil {
		return err
	}
	if status != http.StatusCreated {
		return fmt.Errorf("PUT /%s answered %d: %s", bucketName, status, raw)
	}
	c.vbuckets = vbuckets
	for _, n := range c.nodes {
		err := poll(ctx, bucketReadyTimeout, func() (bool, error) {
			status, _, err := c.request("GET", "http://"+n.httpAddr+"/"+bucketName, nil)
			return err == nil && status == http.StatusOK, nil
		})
		if err != nil {
			return fmt.Errorf("bucket %s on %s: %w", bucketName, n, err)
		}
	}
	return nil
}

// postToLeader sends a management form to the Raft leader's management door, retrying while
// there is no leader or it answers 503 (a leader change in progress). 404 and 405 (an older
// settee) come back as errRefused.
func (c *cluster) postToLeader(ctx context.Context, path string, form url.Values) error {
	var last error
	err := poll(ctx, 30*time.Second, func() (bool, error) {
		_, leader, err := c.leaderView()
		if err != nil {
			last = err
			return false, nil
		}
		status, raw, err := c.request("POST", "http://"+leader.mgmtAddr+path, form)
		switch {
		case err != nil:
			last = err
			return false, nil
		case status == http.StatusOK:
			return true, nil
		case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
			return false, fmt.Errorf("POST %s answered %d %s: %w", path, status, strings.TrimSpace(string(raw)), errRefused)
		case status == http.StatusServiceUnavailable:
			last = fmt.Errorf("POST %s answered %d %s", path, status, raw)
			return false, nil
		default:
			return false, fmt.Errorf("POST %s answered %d %s", path, status, raw)
		}
	})
	if err != nil && last != nil && !errors.Is(err, errRefused) {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return err
}

// setAutoFailover sets the auto-failover timeout (Couchbase's `POST /settings/autoFailover`).
func (c *cluster) setAutoFailover(ctx context.Context, seconds int) error {
	return c.postToLeader(ctx, "/settings/autoFailover",
		url.Values{"enabled": {"true"}, "timeout": {strconv.Itoa(seconds)}})
}

// reAdd adds a failed-over node back (`POST /controller/reAddNode`, delta recovery).
func (c *cluster) reAdd(ctx context.Context, id uint64) error {
	return c.postToLeader(ctx, "/controller/reAddNode",
		url.Values{"otpNode": {strconv.FormatUint(id, 10)}})
}

// poll calls check every 100 ms until it says done, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
