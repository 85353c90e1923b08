package main

// One settee process of a test cluster, and the reaper that makes sure none outlives the test.
//
// Every node runs in its own process group (so kill -9, SIGSTOP and SIGCONT reach exactly that
// node) with a parent-death signal (so a node dies with the test even if the test is killed
// with SIGKILL and cannot clean up). The reaper records every live process group and every
// temporary directory; main runs it on return, on panic and on SIGINT/SIGTERM.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// nodeStartTimeout bounds how long a node may take to print its doors.
const nodeStartTimeout = 60 * time.Second

// reaper kills what the test started and removes what it created, at most once each.
type reaper struct {
	// mu guards groups and dirs: nodes start and exit from several goroutines.
	mu     sync.Mutex
	groups map[int]bool
	dirs   []string
}

var theReaper = &reaper{groups: map[int]bool{}}

func (r *reaper) addGroup(pgid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups[pgid] = true
}

func (r *reaper) forgetGroup(pgid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, pgid)
}

func (r *reaper) addDir(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirs = append(r.dirs, dir)
}

// reapAll kills every live process group (SIGKILL ends stopped processes too) and removes
// every directory. Safe to call more than once and from any goroutine.
func (r *reaper) reapAll() {
	r.mu.Lock()
	groups := r.groups
	dirs := r.dirs
	r.groups = map[int]bool{}
	r.dirs = nil
	r.mu.Unlock()
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if len(groups) > 0 {
		// Let the kernel release the files before the directories go.
		time.Sleep(200 * time.Millisecond)
	}
	for _, dir := range dirs {
		_ = os.RemoveAll(dir)
	}
}

// node is one settee process; it keeps its arguments and data directory across restarts.
type node struct {
	index                                   int // 1-based, in start order
	dir                                     string
	args                                    []string
	secret                                  string
	binary                                  string
	httpAddr, kvAddr, mgmtAddr, clusterAddr string
	id                                      uint64
	// ns is the node's network namespace (nil: it runs in the program's, on loopback).
	ns *netns

	// mu guards the process fields: the nemesis and the healer both signal nodes.
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

func (n *node) logPath() string { return n.dir + "/log" }

func (n *node) String() string { return fmt.Sprintf("node%d (id %d)", n.index, n.id) }

var (
	readyLine = []byte("couchbase kv on")
	idLine    = regexp.MustCompile(`settee cluster node (\d+) on `)
)

// start runs the node (again) with its arguments and waits until its log says it serves KV.
func (n *node) start(ctx context.Context) error {
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		return fmt.Errorf("%s is already running", n)
	}
	log, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	offset, _ := log.Seek(0, io.SeekEnd)
	cmd := exec.Command(n.binary, n.args...)
	if n.ns != nil {
		cmd = n.ns.command(n.binary, n.args...)
	}
	cmd.Env = append(os.Environ(), "SETTEE_CLUSTER_SECRET="+n.secret)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		n.mu.Unlock()
		return err
	}
	theReaper.addGroup(cmd.Process.Pid)
	exited := make(chan struct{})
	n.cmd, n.exited, n.paused = cmd, exited, false
	n.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		log.Close()
		theReaper.forgetGroup(cmd.Process.Pid)
		n.mu.Lock()
		if n.cmd == cmd {
			n.cmd, n.paused = nil, false
		}
		n.mu.Unlock()
		close(exited)
	}()
	return n.waitReady(ctx, offset, exited)
}

// waitReady polls the log written since offset for the line the node prints once it serves.
func (n *node) waitReady(ctx context.Context, offset int64, exited chan struct{}) error {
	deadline := time.Now().Add(nodeStartTimeout)
	for {
		written, _ := os.ReadFile(n.logPath())
		if int64(len(written)) >= offset {
			fresh := written[offset:]
			if bytes.Contains(fresh, readyLine) {
				if match := idLine.FindSubmatch(fresh); match != nil {
					n.id, _ = strconv.ParseUint(string(match[1]), 10, 64)
				}
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("node%d exited while starting; log tail:\n%s", n.index, tail(written, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node%d did not serve within %s", n.index, nodeStartTimeout)
		}
	}
}

// signal sends sig to the node's process group; false if it is not running.
func (n *node) signal(sig syscall.Signal) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, sig); err != nil {
		return false
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	return true
}

// kill9 kills the node with SIGKILL and waits until it is gone.
func (n *node) kill9() {
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	if n.signal(syscall.SIGKILL) {
		<-exited
	}
}

func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// reachable: running and not stopped, so it can answer a request.
func (n *node) reachable() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.paused
}

func (n *node) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// freePorts returns count distinct loopback ports nobody listened on a moment ago.
func freePorts(count int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, listener := range listeners {
			listener.Close()
		}
	}()
	ports := make([]int, 0, count)
	for len(ports) < count {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, listener)
		ports = append(ports, listener.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last lines of a log, for an error message.
func tail(text []byte, lines int) string {
	parts := bytes.Split(bytes.TrimRight(text, "\n"), []byte("\n"))
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return string(bytes.Join(parts, []byte("\n")))
}

// errRefused marks a management request the node does not offer (404/405): an older settee.
var errRefused = errors.New("refused by this settee")
