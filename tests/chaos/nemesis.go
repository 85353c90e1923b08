package main

// The nemesis: rounds of process faults, each followed by healing and a quiet pause in which
// the workload runs undisturbed. The schedule (which fault, how long, which candidate victim,
// how long the pause) comes from a seeded generator, so --seed reproduces it; the victims are
// chosen among the candidates of the moment (the Raft leader, the nodes holding active
// vbuckets), which the seed picks by position.
//
// Faults: kill -9 of a node holding active vbuckets (not the leader), then restart; kill -9 of
// the Raft leader, then restart; SIGSTOP shorter than the auto-failover timeout, then SIGCONT
// (the node must not be failed over); SIGSTOP until the map shows the node failed over, then
// SIGCONT; a partition cutting a node holding active vbuckets (not the leader) off from the
// other nodes, then healed; the same for the Raft leader (netns.go: the clients still reach the
// cut node, whose serving lease must stop it serving; some cuts outlast the failover timeout,
// some do not). After every round the cluster is healed: killed nodes restarted, failed-over
// nodes re-added (reAddNode), the map whole and quiet. Without --partitions' namespaces the
// partition kinds are left out of the schedule.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

type faultKind int

const (
	killActive faultKind = iota
	killLeader
	pauseShort
	pauseLong
	partitionActive
	partitionLeader
	faultKinds
)

var faultNames = [faultKinds]string{
	"kill -9 of a node holding active vbuckets",
	"kill -9 of the Raft leader",
	"SIGSTOP shorter than the failover timeout",
	"SIGSTOP until failed over",
	"partition of a node holding active vbuckets from the others",
	"partition of the Raft leader from the others",
}

// fault is one planned round.
type fault struct {
	round int
	kind  faultKind
	// hold: how long a killed node stays down, a short pause lasts, or a long pause goes on
	// after the failover is seen.
	hold time.Duration
	pick float64 // which candidate victim, by position
	rest time.Duration
	mode partitionMode // how a partition loses traffic
}

// schedule generates the rounds from the seed.
type schedule struct {
	rng        *rand.Rand
	timeout    time.Duration
	round      int
	firstSet   []faultKind
	partitions bool
}

func newSchedule(seed uint64, timeout time.Duration, partitions bool) *schedule {
	s := &schedule{rng: rand.New(rand.NewPCG(seed, seed^0x5e77ee)), timeout: timeout, partitions: partitions}
	// The first rounds are every kind once, in a seeded order, so any run of at least
	// faultKinds rounds has each of them.
	s.firstSet = []faultKind{killActive, killLeader, pauseShort, pauseLong}
	if partitions {
		s.firstSet = append(s.firstSet, partitionActive, partitionLeader)
	}
	s.rng.Shuffle(len(s.firstSet), func(i, j int) { s.firstSet[i], s.firstSet[j] = s.firstSet[j], s.firstSet[i] })
	return s
}

func (s *schedule) next() fault {
	s.round++
	f := fault{round: s.round, pick: s.rng.Float64()}
	if s.round <= len(s.firstSet) {
		f.kind = s.firstSet[s.round-1]
	} else {
		// Weights: kills of active nodes most often, as the fault that tests replica promotion.
		p := s.rng.IntN(100)
		if s.partitions {
			// The process faults get 60 of 100, in the same proportions.
			p = p * 100 / 60
		}
		switch {
		case p < 35:
			f.kind = killActive
		case p < 55:
			f.kind = killLeader
		case p < 75:
			f.kind = pauseShort
		case p < 100:
			f.kind = pauseLong
		case p < 135:
			f.kind = partitionActive
		default:
			f.kind = partitionLeader
		}
	}
	fraction := s.rng.Float64()
	switch f.kind {
	case killActive, killLeader:
		// Down from no time at all to twice the timeout: sometimes back before the failover.
		f.hold = time.Duration(fraction * 2 * float64(s.timeout))
	case pauseShort:
		f.hold = time.Duration((0.2 + 0.3*fraction) * float64(s.timeout))
	case pauseLong:
		f.hold = time.Duration(fraction * float64(time.Second))
	case partitionActive, partitionLeader:
		// From a blip to three timeouts: mostly long enough for a failover while the cut node
		// still hears from clients.
		f.hold = time.Duration((0.2 + 2.8*fraction) * float64(s.timeout))
		if s.rng.IntN(3) == 0 {
			f.mode = cutReject
		}
	}
	f.rest = time.Second + time.Duration(s.rng.Float64()*float64(2*time.Second))
	return f
}

// faultStats counts what the nemesis did and saw.
type faultStats struct {
	rounds             int
	byKind             [faultKinds]int
	killsOfActiveNodes int // kill -9 of a node that held active vbuckets (either kind)
	failoversSeen      int
	reAdds             int
	// failures are check failures: a short pause failed over, a long one never was.
	failures []string
}

type nemesis struct {
	c            *cluster
	timeout      time.Duration
	stats        *faultStats
	reAddRefused *bool
	rec          *recorder
	annotations  []porcupine.Annotation
}

// victim chooses among candidates by the fault's pick.
func victim(candidates []*node, pick float64) *node {
	return candidates[int(pick*float64(len(candidates)))%len(candidates)]
}

// run performs one round and heals the cluster; errNoReAdd means it could not be healed.
func (n *nemesis) run(ctx context.Context, f fault) error {
	view, leader, err := n.c.leaderView()
	if err != nil {
		return fmt.Errorf("round %d: %w", f.round, err)
	}
	var followers, all []*node
	for _, candidate := range n.c.nodes {
		if view.memberState(candidate.id) != "active" || !candidate.reachable() {
			continue
		}
		all = append(all, candidate)
		if candidate != leader && view.activeVBuckets(candidate.id) > 0 {
			followers = append(followers, candidate)
		}
	}
	if len(followers) == 0 {
		return fmt.Errorf("round %d: no node other than the leader holds active vbuckets", f.round)
	}
	var target *node
	switch f.kind {
	case killActive, partitionActive:
		target = victim(followers, f.pick)
	case killLeader, partitionLeader:
		target = leader
	default:
		target = victim(all, f.pick)
	}
	role := "follower"
	if target == leader {
		role = "Raft leader"
	}
	actives := view.activeVBuckets(target.id)
	n.stats.rounds++
	n.stats.byKind[f.kind]++
	start := n.rec.now()
	description := fmt.Sprintf("%s: %s (%s, %d active vbuckets)", faultNames[f.kind], target, role, actives)
	if f.kind == partitionActive || f.kind == partitionLeader {
		description += ", " + f.mode.String()
	}
	logf("round %d: %s, hold %s", f.round, description, f.hold.Round(time.Millisecond))
	switch f.kind {
	case killActive, killLeader:
		if actives > 0 {
			n.stats.killsOfActiveNodes++
		}
		target.kill9()
		if !sleep(ctx, f.hold) {
			return ctx.Err()
		}
		if err := target.start(ctx); err != nil {
			return err
		}
		logf("round %d: %s restarted", f.round, target)
	case pauseShort:
		target.signal(syscall.SIGSTOP)
		if !sleep(ctx, f.hold) {
			return ctx.Err()
		}
		target.signal(syscall.SIGCONT)
		logf("round %d: %s continued", f.round, target)
	case pauseLong:
		target.signal(syscall.SIGSTOP)
		waited := time.Now()
		err := poll(ctx, n.timeout+30*time.Second, func() (bool, error) {
			view, _, err := n.c.leaderView()
			return err == nil && view.memberState(target.id) == "failed", nil
		})
		if err != nil {
			n.stats.failures = append(n.stats.failures, fmt.Sprintf(
				"round %d: %s stopped for %s was not failed over", f.round, target, time.Since(waited).Round(time.Millisecond)))
			logf("round %d: CHECK FAILED: %s not failed over after %s", f.round, target, time.Since(waited).Round(time.Millisecond))
		} else {
			logf("round %d: the map shows %s failed over %s after SIGSTOP", f.round, target, time.Since(waited).Round(time.Millisecond))
		}
		if !sleep(ctx, f.hold) {
			return ctx.Err()
		}
		target.signal(syscall.SIGCONT)
		logf("round %d: %s continued", f.round, target)
	case partitionActive, partitionLeader:
		mend, err := n.c.partition(target, f.mode)
		if err != nil {
			return fmt.Errorf("round %d: partitioning %s: %w", f.round, target, err)
		}
		slept := sleep(ctx, f.hold)
		if err := mend(); err != nil {
			return fmt.Errorf("round %d: healing the partition of %s: %w", f.round, target, err)
		}
		if !slept {
			return ctx.Err()
		}
		logf("round %d: the partition of %s healed", f.round, target)
	}
	faultEnd := n.rec.now()
	healStart := time.Now()
	healed, err := n.c.heal(ctx, n.reAddRefused)
	n.stats.failoversSeen += len(healed.failedOver)
	n.stats.reAdds += len(healed.reAdded)
	if f.kind == pauseShort && slices.Contains(healed.failedOver, target.id) {
		n.stats.failures = append(n.stats.failures, fmt.Sprintf(
			"round %d: %s stopped for %s (< the %s timeout) was failed over", f.round, target, f.hold.Round(time.Millisecond), n.timeout))
		logf("round %d: CHECK FAILED: %s failed over after a pause shorter than the timeout", f.round, target)
	}
	n.annotations = append(n.annotations,
		porcupine.Annotation{Tag: "nemesis", Start: start, End: faultEnd, Description: fmt.Sprintf("round %d", f.round), Details: description},
		porcupine.Annotation{Tag: "nemesis", Start: faultEnd, End: n.rec.now(), Description: "heal",
			Details: fmt.Sprintf("failed over %v, re-added %v", healed.failedOver, healed.reAdded)})
	if err != nil {
		logf("round %d: not healed: %v", f.round, err)
		return err
	}
	logf("round %d: healed in %s (failed over %v, re-added %v)", f.round,
		time.Since(healStart).Round(time.Millisecond), healed.failedOver, healed.reAdded)
	return nil
}
