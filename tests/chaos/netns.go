package main

// Network partitions, in network namespaces the test creates.
//
// With partitions on, the program first moves itself into a network namespace of its own (a
// re-exec with CLONE_NEWNET, plus CLONE_NEWUSER when it is not root), so that nothing it makes
// touches the host's network and all of it vanishes with the process, even after a SIGKILL.
// There it makes a bridge (`settee-br`, 10.77.0.1/24: the clients' address) and gives every
// node a namespace of its own, held by a `sleep` process (so the namespace outlives restarts of
// the node), with one veth into the bridge (node i is 10.77.0.(10+i)). Every node listens on
// the same ports in its own namespace.
//
// A partition cuts a node off from the other nodes while the clients still reach every node:
// the cut node keeps getting the workload's requests for the vbuckets it was active for, which
// is the case its serving lease exists for. Two ways, both with iproute2 alone (the kernel here
// has no traffic-control qdiscs and there is no iptables):
//   - drop: each side's neighbour entry for the other becomes a permanent one with a MAC that
//     no port has, so frames leave and are lost: connections in flight stall, new ones time
//     out, as across a dead switch;
//   - reject: each side routes the other to `prohibit`, so sends fail at once (an ICMP-refused
//     network).
// Healing deletes the entries; the neighbours are resolved again.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

const (
	// netnsMarker is set in the environment of the re-executed program.
	netnsMarker  = "SETTEE_CHAOS_NETNS"
	bridgeName   = "settee-br"
	bridgeAddr   = "10.77.0.1"
	subnetPrefix = "10.77.0."
	// nobodysMAC is a locally administered address no interface has.
	nobodysMAC = "02:00:5e:77:ee:00"
)

// partitionMode is how a cut loses traffic.
type partitionMode int

const (
	cutDrop partitionMode = iota
	cutReject
)

func (m partitionMode) String() string {
	if m == cutReject {
		return "reject"
	}
	return "drop"
}

// insidePrivateNetwork says whether this process is the re-executed one.
func insidePrivateNetwork() bool { return os.Getenv(netnsMarker) == "1" }

// reExecInPrivateNetwork runs this program again in a network namespace of its own and returns
// its exit status. Signals reach the child, which stops its nodes itself.
func reExecInPrivateNetwork() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return 0, errors.New("partitions need iproute2's ip (apt-get install iproute2)")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		return 0, errors.New("partitions need util-linux's nsenter")
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), netnsMarker+"=1")
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		// Root of a user namespace of our own may make network namespaces in it.
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("a network namespace for the partitions (%w); run with --no-partitions where namespaces cannot be made", err)
	}
	go func() {
		for received := range signals {
			_ = cmd.Process.Signal(received)
		}
	}()
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// run runs a command and returns its error with its output.
func runCommand(name string, args ...string) error {
	var output bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(output.String()))
	}
	return nil
}

// makeBridge sets up the program's own namespace: loopback and the bridge the nodes hang on.
func makeBridge() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", bridgeAddr + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if err := runCommand("ip", args...); err != nil {
			return err
		}
	}
	return nil
}

// netns is one node's network namespace, held by a sleeping process.
type netns struct {
	holder  *exec.Cmd
	addr    string
	outside string // the veth end on the bridge
}

// path names the namespace for nsenter.
func (ns *netns) path() string { return fmt.Sprintf("/proc/%d/ns/net", ns.holder.Process.Pid) }

// newNetns makes the namespace of node index of the cluster-th cluster and wires it into the
// bridge.
func newNetns(cluster, index int) (*netns, error) {
	holder := exec.Command("sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("a network namespace for node%d: %w", index, err)
	}
	theReaper.addGroup(holder.Process.Pid)
	go func() { _ = holder.Wait() }()
	// Interface names: 15 bytes at most, and a new one per cluster (a namespace goes away
	// asynchronously).
	ns := &netns{holder: holder, addr: fmt.Sprintf("%s%d", subnetPrefix, 10+index),
		outside: fmt.Sprintf("sv%d-%d", cluster%100000, index)}
	if err := runCommand("ip", "link", "add", ns.outside, "type", "veth", "peer", "name", "eth0",
		"netns", fmt.Sprint(holder.Process.Pid)); err != nil {
		ns.remove()
		return nil, err
	}
	if err := runCommand("ip", "link", "set", ns.outside, "master", bridgeName, "up"); err != nil {
		ns.remove()
		return nil, err
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", ns.addr + "/24", "dev", "eth0"},
		{"link", "set", "eth0", "up"},
	} {
		if err := ns.ip(args...); err != nil {
			ns.remove()
			return nil, err
		}
	}
	return ns, nil
}

// remove ends the namespace: its holder, its veth pair, and what the bridge's side remembers
// of its address (the next cluster's node there has another MAC).
func (ns *netns) remove() {
	_ = syscall.Kill(-ns.holder.Process.Pid, syscall.SIGKILL)
	theReaper.forgetGroup(ns.holder.Process.Pid)
	_ = runCommand("ip", "link", "del", ns.outside)
	_ = runCommand("ip", "neigh", "flush", "to", ns.addr)
}

// ip runs `ip args...` in the namespace.
func (ns *netns) ip(args ...string) error {
	return runCommand("nsenter", append([]string{"--net=" + ns.path(), "--", "ip"}, args...)...)
}

// command is name args... to be run in the namespace.
func (ns *netns) command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + ns.path(), "--", name}, args...)...)
}

// cut makes this namespace lose its traffic to addr.
func (ns *netns) cut(addr string, mode partitionMode) error {
	if mode == cutReject {
		return ns.ip("route", "add", "prohibit", addr+"/32")
	}
	return ns.ip("neigh", "replace", addr, "lladdr", nobodysMAC, "dev", "eth0", "nud", "permanent")
}

// mend undoes cut.
func (ns *netns) mend(addr string, mode partitionMode) error {
	if mode == cutReject {
		return ns.ip("route", "del", "prohibit", addr+"/32")
	}
	return ns.ip("neigh", "del", addr, "dev", "eth0")
}

// partition cuts victim off from every other node (both directions); the clients, in the
// program's namespace, still reach it. It returns the function that heals the cut.
func (c *cluster) partition(victim *node, mode partitionMode) (func() error, error) {
	if victim.ns == nil {
		return nil, errors.New("partitions need the nodes in network namespaces (not with --no-partitions)")
	}
	var pairs [][2]*node
	heal := func() error {
		var errs []error
		for _, pair := range pairs {
			errs = append(errs, pair[0].ns.mend(pair[1].ns.addr, mode))
		}
		return errors.Join(errs...)
	}
	for _, other := range c.nodes {
		if other == victim {
			continue
		}
		for _, pair := range [][2]*node{{victim, other}, {other, victim}} {
			if err := pair[0].ns.cut(pair[1].ns.addr, mode); err != nil {
				return nil, errors.Join(err, heal())
			}
			pairs = append(pairs, pair)
		}
	}
	return heal, nil
}
