package main

// --bench-failover: how long writes to a dead node's vbuckets are unavailable. A benchmark, not
// a test: it fails only if a trial cannot run.
//
// Each trial starts a fresh 3-node cluster, creates the bucket (--replicas, 1 by default), sets the
// auto-failover timeout and picks the victim: a node holding active vbuckets that is not the
// Raft leader, or the leader itself (--victims; reported apart). For each of the victim's active
// vbuckets two keys that hash to it are written once (so the client knows the map), then the
// victim is killed (-9) and, from that instant, each key is upserted again and again (500 ms
// per attempt; the next one at once, or after 5 ms if the answer came back sooner, so that
// instant refusals do not spin two cores) until one succeeds:
//   - one key of each vbucket without durability: when the vbucket took writes again, i.e. when
//     a replica was promoted and the client followed the new map;
//   - the other with majority durability: settee keeps a failed-over node in the replica
//     chains it was in (docs/format/cluster-map.md); with one replica a majority of such a chain
//     needs that node back (as Couchbase needs a rebalance), so the bench restarts the victim
//     once the map shows it failed over and re-adds it (POST /controller/reAddNode), and this
//     figure includes that; with --replicas 2 the promoted active and the other replica are a
//     majority at once, and the figure is the failover's alone.
// A trial's figure is the time until every vbucket had its first successful write; the median
// over its vbuckets is reported too, and when the leader's map first showed the failover.
//
// With gocb's defaults the write figures sit near 5 s whatever the failover takes: requests
// queued for the dead node wait for gocbcore's reconnect backoff (server_wait_backoff, 5 s)
// before they are routed by the new map. --sdk-options server_wait_backoff=100 (milliseconds)
// shows settee's own share.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/couchbase/gocb/v2"
)

const (
	benchOpTimeout = 500 * time.Millisecond
	// benchTrialLimit bounds how long a trial waits for writes to succeed.
	benchTrialLimit = 60 * time.Second
)

// trial is one trial's measurements; durations are from the kill, negative when never.
type trial struct {
	timeoutSeconds int
	leader         bool // the victim led the Raft group
	victim         string
	vbuckets       int
	failover       time.Duration   // the leader's map shows the victim failed over
	reAdded        time.Duration   // restarted, re-added and the map whole again
	plain          []time.Duration // per vbucket: first write without durability
	majority       []time.Duration // per vbucket: first majority write
}

func runBench(ctx context.Context, cfg *config) int {
	var trials []trial
	for _, seconds := range cfg.timeouts {
		for i := 0; i < cfg.trials && ctx.Err() == nil; i++ {
			leader := cfg.victims == "leader" || cfg.victims == "both" && i%2 == 1
			t, err := benchTrial(ctx, cfg, seconds, leader)
			if err != nil {
				logf("trial %d (timeout %d s): %v", i+1, seconds, err)
				return 1
			}
			logf("trial %d/%d: timeout %d s, victim %s (%s, %d active vbuckets): failover in the map %s, whole again %s; "+
				"writes: all vbuckets %s (per-vbucket median %s); majority writes: all %s (median %s)",
				i+1, cfg.trials, seconds, t.victim, victimKind(t.leader), t.vbuckets, ms(t.failover), ms(t.reAdded),
				ms(worst(t.plain)), ms(median(t.plain)), ms(worst(t.majority)), ms(median(t.majority)))
			trials = append(trials, t)
		}
	}
	if ctx.Err() != nil {
		return 1
	}
	printBenchSummary(cfg, trials)
	return 0
}

func benchTrial(ctx context.Context, cfg *config, seconds int, wantLeader bool) (trial, error) {
	t := trial{timeoutSeconds: seconds, leader: wantLeader}
	c, err := startCluster(ctx, cfg.binary, clusterSize, false)
	if err != nil {
		return t, err
	}
	defer c.close()
	if err := c.createBucket(ctx, cfg.vbuckets, cfg.replicas); err != nil {
		return t, err
	}
	if err := c.setAutoFailover(ctx, seconds); err != nil {
		if !errors.Is(err, errRefused) || seconds != defaultFailoverTimeout {
			return t, fmt.Errorf("setting the auto-failover timeout to %d s: %w", seconds, err)
		}
	}
	reAddRefused := false
	if _, err := c.heal(ctx, &reAddRefused); err != nil {
		return t, err
	}
	view, leader, err := c.leaderView()
	if err != nil {
		return t, err
	}
	victim := leader
	if !wantLeader {
		for _, n := range c.nodes {
			if n != leader && view.activeVBuckets(n.id) > 0 {
				victim = n
				break
			}
		}
	}
	t.victim = victim.String()
	terse, err := c.terse(leader)
	if err != nil {
		return t, err
	}
	vbuckets := terse.activeVBucketsOf(victim)
	t.vbuckets = len(vbuckets)
	if len(vbuckets) == 0 {
		return t, fmt.Errorf("%s holds no active vbucket", victim)
	}
	cl, collection, err := connect(c.connectionString()+cfg.sdkOptions, benchOpTimeout)
	if err != nil {
		return t, err
	}
	defer closeSoon(cl)
	plainKeys, majorityKeys := make([]string, len(vbuckets)), make([]string, len(vbuckets))
	for i, vb := range vbuckets {
		plainKeys[i] = keyOn(vb, cfg.vbuckets, "plain")
		majorityKeys[i] = keyOn(vb, cfg.vbuckets, "majority")
		for _, key := range []string{plainKeys[i], majorityKeys[i]} {
			if firstWrite(ctx, collection, key, gocb.DurabilityLevelMajority, time.Now(), 30*time.Second) < 0 {
				return t, fmt.Errorf("no write to %s succeeded before the kill", key)
			}
		}
	}

	victim.kill9()
	killed := time.Now()
	t.plain = make([]time.Duration, len(vbuckets))
	t.majority = make([]time.Duration, len(vbuckets))
	var wg sync.WaitGroup
	for i := range vbuckets {
		wg.Add(2)
		guarded(func() {
			defer wg.Done()
			t.plain[i] = firstWrite(ctx, collection, plainKeys[i], gocb.DurabilityLevelNone, killed, benchTrialLimit)
		})
		guarded(func() {
			defer wg.Done()
			t.majority[i] = firstWrite(ctx, collection, majorityKeys[i], gocb.DurabilityLevelMajority, killed, benchTrialLimit)
		})
	}
	t.failover, t.reAdded = -1, -1
	err = poll(ctx, benchTrialLimit, func() (bool, error) {
		view, _, err := c.leaderView()
		return err == nil && view.memberState(victim.id) == "failed", nil
	})
	if err == nil {
		t.failover = time.Since(killed)
		// heal restarts the victim and re-adds it until it stays active (a node re-added right
		// after its restart may be failed over once more).
		if _, err := c.heal(ctx, &reAddRefused); err != nil {
			logf("healing after the failover: %v", err)
		} else {
			t.reAdded = time.Since(killed)
		}
	}
	wg.Wait()
	return t, nil
}

// keyOn returns a key that hashes to vbucket vb.
func keyOn(vb, vbuckets int, kind string) string {
	for i := 0; ; i++ {
		key := fmt.Sprintf("bench-%s-%d", kind, i)
		if vbucketOf(key, vbuckets) == vb {
			return key
		}
	}
}

// firstWrite upserts key until a write succeeds and returns how long after since that was,
// or -1 if none succeeded within limit.
func firstWrite(ctx context.Context, collection *gocb.Collection, key string, level gocb.DurabilityLevel, since time.Time, limit time.Duration) time.Duration {
	for attempt := 0; ctx.Err() == nil && time.Since(since) < limit; attempt++ {
		started := time.Now()
		_, err := collection.Upsert(key, attempt, &gocb.UpsertOptions{DurabilityLevel: level, Timeout: benchOpTimeout})
		if err == nil {
			return time.Since(since)
		}
		if time.Since(started) < 5*time.Millisecond {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return -1
}

func victimKind(leader bool) string {
	if leader {
		return "Raft leader"
	}
	return "follower"
}

// worst is the largest duration, or -1 if any is -1 (never).
func worst(ds []time.Duration) time.Duration {
	var most time.Duration
	for _, d := range ds {
		if d < 0 {
			return -1
		}
		most = max(most, d)
	}
	return most
}

// median of the durations (the upper one of an even count), -1 (never) sorting last.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	sorted := append([]time.Duration(nil), ds...)
	sort.Slice(sorted, func(i, j int) bool {
		return sorted[j] < 0 && sorted[i] >= 0 || sorted[i] >= 0 && sorted[j] >= 0 && sorted[i] < sorted[j]
	})
	return sorted[len(sorted)/2]
}

func ms(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}

// msNumber is ms for JSON: whole milliseconds, null for never.
func msNumber(d time.Duration) any {
	if d < 0 {
		return nil
	}
	return d.Round(time.Millisecond).Milliseconds()
}

// printBenchSummary prints, per timeout and victim kind, the median and maximum over trials of
// the trial figures, then the same as one JSON line per group (prefixed BENCH).
func printBenchSummary(cfg *config, trials []trial) {
	fmt.Println()
	fmt.Println("== failover bench summary")
	var lines []string
	for _, seconds := range cfg.timeouts {
		for _, leader := range []bool{false, true} {
			var group []trial
			for _, t := range trials {
				if t.timeoutSeconds == seconds && t.leader == leader {
					group = append(group, t)
				}
			}
			if len(group) == 0 {
				continue
			}
			figure := func(pick func(trial) time.Duration) []time.Duration {
				out := make([]time.Duration, len(group))
				for i, t := range group {
					out[i] = pick(t)
				}
				return out
			}
			plainAll := figure(func(t trial) time.Duration { return worst(t.plain) })
			plainMedian := figure(func(t trial) time.Duration { return median(t.plain) })
			majorityAll := figure(func(t trial) time.Duration { return worst(t.majority) })
			failovers := figure(func(t trial) time.Duration { return t.failover })
			fmt.Printf("timeout %d s, victim %s, %d trials: failover in the map median %s; writes to every vbucket "+
				"median %s, max %s (per-vbucket median %s); majority writes (%d replicas) median %s, max %s\n",
				seconds, victimKind(leader), len(group), ms(median(failovers)), ms(median(plainAll)), ms(worst(plainAll)),
				ms(median(plainMedian)), cfg.replicas, ms(median(majorityAll)), ms(worst(majorityAll)))
			encoded, _ := json.Marshal(map[string]any{
				"failover_timeout_s": seconds, "victim": victimKind(leader), "trials": len(group), "replicas": cfg.replicas,
				"failover_in_map_median_ms":     msNumber(median(failovers)),
				"writes_all_vbuckets_median_ms": msNumber(median(plainAll)), "writes_all_vbuckets_max_ms": msNumber(worst(plainAll)),
				"writes_per_vbucket_median_ms":    msNumber(median(plainMedian)),
				"majority_all_vbuckets_median_ms": msNumber(median(majorityAll)), "majority_all_vbuckets_max_ms": msNumber(worst(majorityAll)),
			})
			lines = append(lines, "BENCH "+string(encoded))
		}
	}
	for _, line := range lines {
		fmt.Println(line)
	}
}
