package main

// Healing the cluster between fault rounds and before the final reads: every node running
// again, every failed-over node re-added (`POST /controller/reAddNode`), then a quiet period in
// which the map stays whole. A settee without reAddNode cannot be healed after a failover;
// heal then reports errNoReAdd and the caller ends the run on the cluster as it is.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

const (
	// healTimeout bounds how long a cluster may take to be whole again after a fault.
	healTimeout = 90 * time.Second
	// quietPeriod: the map must stay whole this long before the cluster counts as healed, so a
	// failover decided just as a node came back is seen before the next fault.
	quietPeriod = 1500 * time.Millisecond
)

// errNoReAdd: a node was failed over and cannot come back: this settee refuses
// `POST /controller/reAddNode`, or --no-readd.
var errNoReAdd = errors.New("a failed-over node is not re-added")

// healing is what one heal saw and did.
type healing struct {
	failedOver []uint64 // nodes the map showed failed over
	reAdded    []uint64
}

// reviveAll continues stopped nodes and restarts killed ones.
func (c *cluster) reviveAll(ctx context.Context) error {
	for _, n := range c.nodes {
		if n.isPaused() {
			n.signal(syscall.SIGCONT)
		}
		if !n.running() {
			if err := n.start(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// heal revives every node, re-adds the failed-over ones and waits until the cluster is whole
// and quiet. reAddRefused is remembered across calls: once refused, heal does not ask again.
func (c *cluster) heal(ctx context.Context, reAddRefused *bool) (healing, error) {
	var done healing
	if err := c.reviveAll(ctx); err != nil {
		return done, err
	}
	previous := map[uint64]string{} // each member's state at the last look
	shown := ""
	asked := map[uint64]time.Time{}
	var quietSince time.Time
	var problem string
	deadline := time.Now().Add(healTimeout)
	for time.Now().Before(deadline) {
		view, _, err := c.leaderView()
		if err != nil {
			problem, quietSince = err.Error(), time.Time{}
			if !sleep(ctx, 200*time.Millisecond) {
				return done, ctx.Err()
			}
			continue
		}
		if states := c.describeMembers(view); states != shown {
			logf("heal: map revision %d: %s", view.Revision, states)
			shown = states
		}
		for _, m := range view.Members {
			was := previous[m.ID]
			previous[m.ID] = m.State
			if m.State != "failed" {
				continue
			}
			if was != "failed" {
				// Counted again if it is failed over again after a re-add.
				done.failedOver = append(done.failedOver, m.ID)
			}
			if *reAddRefused {
				return done, errNoReAdd
			}
			// One request per node every few seconds: the node may still be catching up with
			// the map after its restart, and the leader may refuse until then.
			if time.Since(asked[m.ID]) < 3*time.Second {
				continue
			}
			asked[m.ID] = time.Now()
			switch err := c.reAdd(ctx, m.ID); {
			case errors.Is(err, errRefused):
				*reAddRefused = true
				return done, fmt.Errorf("%w (%v)", errNoReAdd, err)
			case err != nil:
				problem = fmt.Sprintf("re-adding %d: %v", m.ID, err)
			default:
				logf("heal: re-added node %d", m.ID)
				done.reAdded = append(done.reAdded, m.ID)
			}
		}
		whole, why := c.whole(view, true)
		if !whole {
			problem, quietSince = why, time.Time{}
		} else if quietSince.IsZero() {
			quietSince = time.Now()
		} else if time.Since(quietSince) >= quietPeriod {
			return done, nil
		}
		if !sleep(ctx, 250*time.Millisecond) {
			return done, ctx.Err()
		}
	}
	return done, fmt.Errorf("the cluster was not whole within %s: %s", healTimeout, problem)
}

// describeMembers names each member's state in a view, in node order.
func (c *cluster) describeMembers(view *clusterStatus) string {
	var parts []string
	for _, n := range c.nodes {
		if state := view.memberState(n.id); state != "" {
			parts = append(parts, fmt.Sprintf("node%d %s", n.index, state))
		}
	}
	return strings.Join(parts, ", ")
}

// settle waits until every vbucket has an active on every active member's map, without asking
// for replicas or for failed-over nodes to be back: the state a run ends in when re-adding is
// not offered.
func (c *cluster) settle(ctx context.Context) error {
	if err := c.reviveAll(ctx); err != nil {
		return err
	}
	var quietSince time.Time
	var problem string
	err := poll(ctx, healTimeout, func() (bool, error) {
		view, _, err := c.leaderView()
		whole := false
		if err != nil {
			problem = err.Error()
		} else {
			whole, problem = c.whole(view, false)
		}
		if !whole {
			quietSince = time.Time{}
			return false, nil
		}
		if quietSince.IsZero() {
			quietSince = time.Now()
		}
		return time.Since(quietSince) >= quietPeriod, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, problem)
	}
	return nil
}

// whole says whether the cluster is whole in the leader's view: (full) every member active;
// every active member at the leader's revision with a terse config in which every vbucket has
// an active and, if full, a replica. Otherwise it says what is missing.
func (c *cluster) whole(view *clusterStatus, full bool) (bool, string) {
	active := 0
	for _, m := range view.Members {
		switch m.State {
		case "active":
			active++
		case "ejected":
		default:
			if full {
				return false, fmt.Sprintf("member %d is %s", m.ID, m.State)
			}
		}
	}
	for _, m := range view.Members {
		if m.State != "active" {
			continue
		}
		n := c.nodeByID(m.ID)
		if n == nil || !n.reachable() {
			return false, fmt.Sprintf("member %d is not running", m.ID)
		}
		s, err := c.status(n)
		if err != nil {
			return false, err.Error()
		}
		if s.Revision != view.Revision {
			return false, fmt.Sprintf("%s at revision %d, the leader at %d", n, s.Revision, view.Revision)
		}
		t, err := c.terse(n)
		if err != nil {
			return false, err.Error()
		}
		if len(t.VBucketServerMap.ServerList) != active {
			return false, fmt.Sprintf("%s lists %d servers for %d active members", n, len(t.VBucketServerMap.ServerList), active)
		}
		for vb, row := range t.VBucketServerMap.VBucketMap {
			if len(row) == 0 || row[0] < 0 {
				return false, fmt.Sprintf("vbucket %d has no active on %s's map", vb, n)
			}
			if full && t.VBucketServerMap.NumReplicas > 0 && (len(row) < 2 || row[1] < 0) {
				return false, fmt.Sprintf("vbucket %d has no replica on %s's map", vb, n)
			}
		}
	}
	return true, ""
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
