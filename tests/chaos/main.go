// Command chaos tests that settee's KV door stays linearizable under process faults, through
// the official Go SDK (gocb), and benchmarks how long a failover takes.
//
// The test (default) starts a real 3-node settee cluster (SETTEE_BIN), creates the
// bucket `db` with one replica, sets the auto-failover timeout, and runs concurrent gocb
// clients (workload.go) doing reads, majority-durable upserts and CAS replaces on a few keys
// while the nemesis (nemesis.go) kills (-9) and stops (SIGSTOP) nodes and heals the cluster
// after each fault (restart, SIGCONT, reAddNode). When the rounds are done the cluster is
// healed, every key is read once more, and porcupine checks the history against a per-key
// register (model.go); acknowledged writes the healed cluster lost are counted too.
// The nemesis also partitions nodes: each node runs in a network namespace the program makes
// (netns.go); --no-partitions keeps them on loopback with process faults only.
//
// If the settee under test refuses POST /controller/reAddNode, a failed-over node cannot come
// back: the run ends there (checked on the two nodes left) and the next rounds run on a fresh
// cluster.
//
// --bench-failover (failover_bench.go) measures instead the time from kill -9 of a node
// holding active vbuckets to the first successful majority write on each of its vbuckets.
//
// Exit status: 0 when every history was linearizable, no acknowledged write was lost and every
// check held; 1 otherwise (including a checker timeout and a run where nothing ran); 2 for a
// usage error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultFailoverTimeout is settee's auto-failover timeout when nobody sets one.
const defaultFailoverTimeout = 5

var programStart = time.Now()

// logf prints a line stamped with the UTC wall clock (as in settee's logs) and the seconds
// since the program started.
func logf(format string, args ...any) {
	now := time.Now()
	fmt.Printf("[%s %8.3fs] %s\n", now.UTC().Format("15:04:05.000"), now.Sub(programStart).Seconds(), fmt.Sprintf(format, args...))
}

type config struct {
	binary              string
	seed                uint64
	rounds              int
	minutes             float64
	clients             int
	keys                int
	vbuckets            int
	failoverTimeout     int
	kvTimeout           time.Duration
	checkTimeout        time.Duration
	roundsPerGeneration int
	results             string
	keepLogs            bool
	sdkOptions          string
	noReAdd             bool
	// partitions: nodes in network namespaces (netns.go), with the partition faults.
	partitions bool

	bench    bool
	trials   int
	timeouts []int
	victims  string
	replicas int
}

func parseFlags(args []string) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: chaos [flags]
  the linearizability-under-faults test (default), or --bench-failover

flags:
`)
		fs.PrintDefaults()
	}
	home, _ := os.UserHomeDir()
	binary := os.Getenv("SETTEE_BIN")
	if binary == "" {
		binary = filepath.Join(home, ".cache/settee/target/release/settee")
	}
	fs.StringVar(&cfg.binary, "settee", binary, "the settee binary ($SETTEE_BIN by default)")
	fs.Uint64Var(&cfg.seed, "seed", 0, "seed of the fault schedule (0: a new one, printed)")
	fs.IntVar(&cfg.rounds, "rounds", 0, "fault rounds to run (0: as many as --minutes allows)")
	fs.Float64Var(&cfg.minutes, "minutes", 10, "how long the nemesis runs when --rounds is 0")
	fs.IntVar(&cfg.clients, "clients", 5, "concurrent gocb clients")
	fs.IntVar(&cfg.keys, "keys", 6, "keys per generation, each on its own vbucket")
	fs.IntVar(&cfg.vbuckets, "vbuckets", 16, "vbuckets of the bucket")
	fs.IntVar(&cfg.replicas, "replicas", 1, "replicas of the bucket (1 or 2 on 3 nodes; with 2 a majority survives a failover without re-adding the node)")
	fs.IntVar(&cfg.failoverTimeout, "failover-timeout", 1, "auto-failover timeout, seconds (POST /settings/autoFailover)")
	fs.DurationVar(&cfg.kvTimeout, "kv-timeout", 2500*time.Millisecond, "gocb KV and durable-write timeout")
	fs.DurationVar(&cfg.checkTimeout, "check-timeout", 3*time.Minute, "porcupine's time limit per run (a timeout fails the test)")
	fs.IntVar(&cfg.roundsPerGeneration, "rounds-per-generation", 4, "fault rounds before the clients move to fresh keys")
	fs.StringVar(&cfg.results, "results", "results", "where visualisations and logs of failed runs go")
	fs.BoolVar(&cfg.keepLogs, "keep-logs", false, "keep the node logs of every run under --results, not only of failed ones")
	sdkOptions := fs.String("sdk-options", "", "gocb connection string options, e.g. config_poll_interval=500ms")
	fs.BoolVar(&cfg.noReAdd, "no-readd", false, "never re-add a failed-over node: a failover ends the run and the next rounds start on a fresh cluster (what a settee without POST /controller/reAddNode gets)")
	noPartitions := fs.Bool("no-partitions", false, "no network partitions: the nodes on loopback, process faults only (where network namespaces cannot be made)")
	fs.BoolVar(&cfg.bench, "bench-failover", false, "benchmark failover time instead of testing")
	fs.IntVar(&cfg.trials, "trials", 20, "bench: trials per timeout")
	timeouts := fs.String("timeout", "1", "bench: auto-failover timeouts to measure, seconds, comma-separated")
	fs.StringVar(&cfg.victims, "victims", "both", "bench: which node is killed: follower, leader or both (alternating)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, field := range strings.Split(*timeouts, ",") {
		seconds, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || seconds < 1 {
			return nil, fmt.Errorf("--timeout: %q is not a whole number of seconds >= 1", field)
		}
		cfg.timeouts = append(cfg.timeouts, seconds)
	}
	switch {
	case cfg.failoverTimeout < 1:
		return nil, fmt.Errorf("--failover-timeout must be at least 1")
	case cfg.clients < 1 || cfg.keys < 1 || cfg.vbuckets < 1 || cfg.roundsPerGeneration < 1:
		return nil, fmt.Errorf("--clients, --keys, --vbuckets and --rounds-per-generation must be positive")
	case cfg.replicas < 1 || cfg.replicas > clusterSize-1:
		return nil, fmt.Errorf("--replicas must be between 1 and %d", clusterSize-1)
	case cfg.victims != "follower" && cfg.victims != "leader" && cfg.victims != "both":
		return nil, fmt.Errorf("--victims must be follower, leader or both")
	}
	if *sdkOptions != "" {
		cfg.sdkOptions = "?" + strings.TrimPrefix(*sdkOptions, "?")
	}
	if cfg.seed == 0 {
		cfg.seed = uint64(time.Now().UnixNano())
	}
	// The failover benchmark measures on loopback, as before partitions came.
	cfg.partitions = !*noPartitions && !cfg.bench
	return cfg, nil
}

func main() {
	code := run()
	theReaper.reapAll()
	os.Exit(code)
}

func run() int {
	cfg, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	if info, err := os.Stat(cfg.binary); err != nil || info.IsDir() {
		fmt.Fprintf(os.Stderr, "chaos: no settee binary at %s (build it: cargo build --release -p settee)\n", cfg.binary)
		return 1
	}
	if cfg.partitions && !insidePrivateNetwork() {
		// The same program with the same flags (and the seed chosen here), in a namespace.
		os.Args = append(os.Args, "--seed", strconv.FormatUint(cfg.seed, 10))
		code, err := reExecInPrivateNetwork()
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 1
		}
		return code
	}
	if cfg.partitions {
		if err := makeBridge(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos: the network of the partitions:", err)
			return 1
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first SIGINT/SIGTERM stops the test, which then stops its nodes; a second one, or
	// 30 s without an end, kills them at once.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		received := <-signals
		logf("%s: stopping", received)
		cancel()
		select {
		case <-signals:
		case <-time.After(30 * time.Second):
		}
		theReaper.reapAll()
		os.Exit(130)
	}()
	defer func() {
		if panicked := recover(); panicked != nil {
			theReaper.reapAll()
			panic(panicked)
		}
	}()
	if cfg.bench {
		return runBench(ctx, cfg)
	}
	return runTest(ctx, cfg)
}

// guarded runs f in a goroutine; a panic there still stops every node before the crash.
func guarded(f func()) {
	go func() {
		defer func() {
			if panicked := recover(); panicked != nil {
				theReaper.reapAll()
				panic(panicked)
			}
		}()
		f()
	}()
}
