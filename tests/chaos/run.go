package main

// The test: runs of workload + nemesis on a cluster, each run's history checked by porcupine,
// and the summary. A run is one cluster's life: it ends when the rounds are done or when a
// failed-over node cannot be re-added (an older settee), and the next rounds start on a fresh
// cluster.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// clusterSize: three nodes, the smallest cluster that fails one over automatically.
const clusterSize = 3

// totals aggregates every run of the test.
type totals struct {
	runs         int
	operations   int
	counts       map[string]*[4]int
	verdicts     map[porcupine.CheckResult]int
	lost         []lostWrite
	failures     []string
	reAddRefused bool
	interrupted  bool
}

func runTest(ctx context.Context, cfg *config) int {
	logf("seed %d (reproduce the fault schedule with --seed %d)", cfg.seed, cfg.seed)
	timeout := time.Duration(cfg.failoverTimeout) * time.Second
	sched := newSchedule(cfg.seed, timeout, cfg.partitions)
	stats := &faultStats{}
	t := &totals{counts: map[string]*[4]int{}, verdicts: map[porcupine.CheckResult]int{}, reAddRefused: cfg.noReAdd}
	deadline := time.Now().Add(time.Duration(cfg.minutes * float64(time.Minute)))
	more := func() bool {
		if cfg.rounds > 0 {
			return stats.rounds < cfg.rounds
		}
		return time.Now().Before(deadline)
	}
	for more() && ctx.Err() == nil && len(t.failures) == 0 {
		if err := runOnce(ctx, cfg, t, sched, stats, more); err != nil {
			t.failures = append(t.failures, err.Error())
		}
	}
	if ctx.Err() != nil {
		t.interrupted = true
		t.failures = append(t.failures, "interrupted")
	}
	return summarize(cfg, t, stats)
}

// runOnce is one run on a fresh cluster. Infrastructure errors come back; what the checks
// find goes into t.
func runOnce(ctx context.Context, cfg *config, t *totals, sched *schedule, stats *faultStats, more func() bool) error {
	t.runs++
	run := t.runs
	logf("run %d: starting a %d-node cluster", run, clusterSize)
	c, err := startCluster(ctx, cfg.binary, clusterSize, cfg.partitions)
	if err != nil {
		return fmt.Errorf("run %d: starting the cluster: %w", run, err)
	}
	failuresBefore := len(t.failures)
	defer func() {
		if cfg.keepLogs || len(t.failures) > failuresBefore {
			dir := filepath.Join(cfg.results, fmt.Sprintf("seed-%d-run-%d-logs", cfg.seed, run))
			c.saveLogs(dir)
			logf("run %d: node logs in %s", run, absolute(dir))
		}
		c.close()
	}()
	if err := c.createBucket(ctx, cfg.vbuckets, cfg.replicas); err != nil {
		return fmt.Errorf("run %d: %w", run, err)
	}
	if err := c.setAutoFailover(ctx, cfg.failoverTimeout); err != nil {
		if !errors.Is(err, errRefused) || cfg.failoverTimeout != defaultFailoverTimeout {
			return fmt.Errorf("setting the auto-failover timeout to %d s: %w (this settee cannot set it; "+
				"only --failover-timeout %d, its default, works with it)", cfg.failoverTimeout, err, defaultFailoverTimeout)
		}
		logf("run %d: this settee refuses POST /settings/autoFailover; its default %d s timeout applies", run, defaultFailoverTimeout)
	}
	logf("run %d: cluster up (%s), auto-failover timeout %d s", run, c.connectionString(), cfg.failoverTimeout)

	rec := newRecorder()
	logf("run %d: the history's clock starts now (times in the history are seconds from here)", run)
	keys := &keySet{}
	generation := 0
	keys.rotate(generation, cfg.keys, cfg.vbuckets)
	workers := make([]*worker, cfg.clients)
	for i := range workers {
		cl, collection, err := connect(c.connectionString()+cfg.sdkOptions, cfg.kvTimeout)
		if err != nil {
			return fmt.Errorf("run %d: client %d: %w", run, i, err)
		}
		workers[i] = &worker{index: i, clients: cfg.clients, process: i, connection: c.connectionString() + cfg.sdkOptions,
			cluster: cl, collection: collection, rec: rec,
			rng: newRand(cfg.seed, uint64(run*1000+i)), kvTimeout: cfg.kvTimeout}
	}
	workCtx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		guarded(func() { defer wg.Done(); w.run(workCtx, keys) })
	}
	sleep(ctx, 2*time.Second) // the workload alone first

	nem := &nemesis{c: c, timeout: time.Duration(cfg.failoverTimeout) * time.Second, stats: stats,
		reAddRefused: &t.reAddRefused, rec: rec}
	var roundErr error
	for more() && ctx.Err() == nil {
		f := sched.next()
		if roundErr = nem.run(ctx, f); roundErr != nil {
			break
		}
		if stats.rounds%cfg.roundsPerGeneration == 0 {
			generation++
			keys.rotate(generation, cfg.keys, cfg.vbuckets)
		}
		sleep(ctx, f.rest)
	}
	stopWork()
	wg.Wait()
	switch {
	case errors.Is(roundErr, errNoReAdd):
		logf("run %d: ends here: %v; the next rounds run on a fresh cluster", run, roundErr)
	case roundErr != nil && ctx.Err() == nil:
		t.failures = append(t.failures, fmt.Sprintf("run %d: %v", run, roundErr))
	}
	if ctx.Err() != nil {
		return nil
	}
	finalReadsOf(ctx, cfg, t, c, rec, keys, run)
	t.mergeCounts(rec)
	history := rec.history()
	nem.annotations = append(nem.annotations, porcupine.Annotation{Tag: "test", Start: 0, End: rec.now(), Description: fmt.Sprintf("run %d", run)})
	checkHistory(cfg, t, history, nem.annotations, run, rec.start)
	return nil
}

// finalReadsOf heals the cluster (as far as this settee allows), reads every key once more
// into the history and counts the acknowledged writes lost.
func finalReadsOf(ctx context.Context, cfg *config, t *totals, c *cluster, rec *recorder, keys *keySet, run int) {
	var err error
	if !t.reAddRefused {
		_, err = c.heal(ctx, &t.reAddRefused)
	}
	if t.reAddRefused {
		err = c.settle(ctx)
	}
	if err != nil {
		t.failures = append(t.failures, fmt.Sprintf("run %d: not healed before the final reads: %v", run, err))
	}
	cl, collection, err := connect(c.connectionString()+cfg.sdkOptions, cfg.kvTimeout)
	if err != nil {
		t.failures = append(t.failures, fmt.Sprintf("run %d: connecting for the final reads: %v", run, err))
		return
	}
	defer closeSoon(cl)
	everyKey := keys.everyKey()
	final, err := finalReads(ctx, collection, rec, 1<<30, everyKey, cfg.kvTimeout)
	if err != nil {
		t.failures = append(t.failures, fmt.Sprintf("run %d: %v", run, err))
	}
	logf("run %d: final reads of %d keys done", run, len(final))
	lost := lostWrites(rec.history(), final)
	for _, l := range lost {
		logf("run %d: LOST: acknowledged write %q to %s; the healed cluster holds %q", run, l.value, l.key, l.final)
	}
	t.lost = append(t.lost, lost...)
}

// checkHistory runs porcupine on one run's history; on a violation it writes the visualisation
// and names the keys whose history is not linearizable.
func checkHistory(cfg *config, t *totals, history []porcupine.Operation, annotations []porcupine.Annotation, run int, start time.Time) {
	ambiguous := 0
	for _, op := range history {
		if op.Output.(kvOutput).Outcome == outUnknown {
			ambiguous++
		}
	}
	logf("run %d: checking %d operations (%d ambiguous) with porcupine", run, len(history), ambiguous)
	started := time.Now()
	result, info := porcupine.CheckOperationsVerbose(registerModel, history, cfg.checkTimeout)
	t.operations += len(history)
	t.verdicts[result]++
	logf("run %d: porcupine: %s in %s", run, verdictName(result), time.Since(started).Round(time.Millisecond))
	switch result {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.failures = append(t.failures, fmt.Sprintf("run %d: porcupine timed out after %s: linearizability unknown", run, cfg.checkTimeout))
		return
	}
	t.failures = append(t.failures, fmt.Sprintf("run %d: the history is NOT linearizable", run))
	for _, partition := range registerModel.Partition(history) {
		if porcupine.CheckOperationsTimeout(registerModel, partition, cfg.checkTimeout) != porcupine.Illegal {
			continue
		}
		key := partition[0].Input.(kvInput).Key
		path := filepath.Join(cfg.results, fmt.Sprintf("seed-%d-run-%d-%s.txt", cfg.seed, run, key))
		if err := writeOperations(path, partition, annotations, start); err != nil {
			logf("run %d: writing %s: %v", run, path, err)
		}
		logf("run %d: key %s: not linearizable (%d operations): %s", run, key, len(partition), absolute(path))
	}
	info.AddAnnotations(annotations)
	path := filepath.Join(cfg.results, fmt.Sprintf("seed-%d-run-%d.html", cfg.seed, run))
	if err := mkdirFor(path); err == nil {
		err = porcupine.VisualizePath(registerModel, info, path)
		if err == nil {
			logf("run %d: visualisation of the history: %s", run, absolute(path))
			return
		}
		logf("run %d: writing the visualisation: %v", run, err)
	}
}

// writeOperations writes one key's operations in invocation order, with the nemesis rounds
// between them, as text: the first thing to read after a violation.
func writeOperations(path string, ops []porcupine.Operation, annotations []porcupine.Annotation, start time.Time) error {
	if err := mkdirFor(path); err != nil {
		return err
	}
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var end int64
	for _, op := range sorted {
		end = max(end, op.Return)
	}
	annotations = append([]porcupine.Annotation(nil), annotations...)
	sort.Slice(annotations, func(i, j int) bool { return annotations[i].Start < annotations[j].Start })
	var text strings.Builder
	fmt.Fprintf(&text, "# seconds from %s UTC\n", start.UTC().Format("15:04:05.000"))
	fmt.Fprintln(&text, "# invoked (s)  returned (s)  client  operation -> outcome; * = ambiguous, open to the end")
	next := 0
	for _, op := range sorted {
		for next < len(annotations) && annotations[next].Start <= op.Call {
			a := annotations[next]
			fmt.Fprintf(&text, "## %10.4f - %10.4f  %s: %s\n", seconds(a.Start), seconds(a.End), a.Description, a.Details)
			next++
		}
		returned := fmt.Sprintf("%10.4f", seconds(op.Return))
		if op.Output.(kvOutput).Outcome == outUnknown {
			returned = "         *"
		}
		fmt.Fprintf(&text, "%10.4f  %s  %5d  %s\n", seconds(op.Call), returned, op.ClientId, describeOperation(op.Input, op.Output))
	}
	return os.WriteFile(path, []byte(text.String()), 0o644)
}

func seconds(nanoseconds int64) float64 { return float64(nanoseconds) / 1e9 }

func verdictName(result porcupine.CheckResult) string {
	switch result {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	default:
		return "unknown (timed out)"
	}
}

// summarize prints the counts and the verdict line and returns the exit status.
func summarize(cfg *config, t *totals, stats *faultStats) int {
	fmt.Println()
	fmt.Printf("== chaos summary (seed %d)\n", cfg.seed)
	fmt.Printf("runs: %d cluster(s)", t.runs)
	switch {
	case cfg.noReAdd:
		fmt.Print(" (--no-readd: a failover ended its run)")
	case t.reAddRefused:
		fmt.Print(" (this settee refuses POST /controller/reAddNode: a failover ended its run)")
	}
	fmt.Println()
	names := make([]string, 0, len(t.counts))
	for name := range t.counts {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Printf("operations checked: %d\n", t.operations)
	for _, name := range names {
		c := t.counts[name]
		if name == "reconnect" {
			fmt.Printf("  client reconnects (an SDK instance failing every operation): %d\n", c[countOK])
			continue
		}
		if name == "get" {
			fmt.Printf("  get: %d ok, %d failed (dropped from the history)\n", c[countOK], c[countReadError])
			continue
		}
		fmt.Printf("  %s: %d ok, %d definitely failed, %d ambiguous\n", name, c[countOK], c[countFailed], c[countAmbiguous])
	}
	fmt.Printf("fault rounds: %d\n", stats.rounds)
	for kind := faultKind(0); kind < faultKinds; kind++ {
		fmt.Printf("  %s: %d\n", faultNames[kind], stats.byKind[kind])
	}
	fmt.Printf("  kill -9 of a node holding active vbuckets (either kind): %d\n", stats.killsOfActiveNodes)
	fmt.Printf("failovers seen: %d, re-adds: %d\n", stats.failoversSeen, stats.reAdds)
	failures := append(append([]string(nil), t.failures...), stats.failures...)
	if !t.interrupted && (t.operations == 0 || stats.rounds == 0) {
		failures = append(failures, "nothing ran: no operations or no fault rounds")
	}
	if !t.interrupted && cfg.rounds > 0 && stats.rounds < cfg.rounds {
		failures = append(failures, fmt.Sprintf("only %d of %d fault rounds ran", stats.rounds, cfg.rounds))
	}
	linearizable := "yes"
	switch {
	case t.verdicts[porcupine.Illegal] > 0:
		linearizable = "NO"
	case t.verdicts[porcupine.Unknown] > 0 || t.operations == 0:
		linearizable = "unknown"
	}
	for _, failure := range failures {
		fmt.Println("FAILED:", failure)
	}
	fmt.Printf("linearizable: %s, %d acknowledged majority writes lost, %d fault rounds (%d kill -9 of an active node)\n",
		linearizable, len(t.lost), stats.rounds, stats.killsOfActiveNodes)
	if len(failures) > 0 || len(t.lost) > 0 || linearizable != "yes" {
		return 1
	}
	return 0
}

// mergeCounts adds a run's operation counts to the totals.
func (t *totals) mergeCounts(rec *recorder) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for name, c := range rec.counts {
		if t.counts[name] == nil {
			t.counts[name] = &[4]int{}
		}
		for i := range c {
			t.counts[name][i] += c[i]
		}
	}
}

func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

func absolute(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

func mkdirFor(path string) error { return os.MkdirAll(filepath.Dir(path), 0o755) }
