package memcached_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/test/internal/memcached"
)

// seedArgs is the command line the operator writes for the tutorial's spec.
var seedArgs = []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4"}

// The extraArgs rule, tested against the program it protects: token
// sequences drawn from memcached's own option letters and long names
// (whole, abbreviated, clustered, with values inline and apart) are offered
// to the apiserver, and every sequence it accepts is run by real memcached
// after the operator's flags. memcached (getopt_long) must start, serve,
// and still run with every setting the operator manages: a sequence that
// changes one, stops memcached or makes it exit is a counterexample.
func TestExtraArgsRuleAgainstRealMemcached(t *testing.T) {
	h := startHarness(t, "extra-args")
	ctx := context.Background()
	seed := uint64(20261203)
	r := rand.New(rand.NewPCG(seed, seed))
	var tried, accepted int
	for i := range 400 {
		args := randomTokens(r)
		tried++
		mc := &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("args-%03d", i), Namespace: h.namespace},
			Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Memcached: &cachev1alpha1.MemcachedConfig{ExtraArgs: args}},
		}
		err := h.c.Create(ctx, mc, client.DryRunAll)
		if apierrors.IsInvalid(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted++
		srv, err := memcached.TryStart(append(slices.Clone(seedArgs), args...), memcached.Identity{UID: 11211, GID: 11211}, freePort(), nil)
		if err != nil {
			t.Errorf("counterexample %q: accepted, but %v", args, err)
			continue
		}
		if _, err := checkSettings(srv, seedArgs); err != nil {
			t.Errorf("counterexample %q: accepted, but %v", args, err)
		} else if err := srv.SetGet(100); err != nil {
			t.Errorf("counterexample %q: accepted, but %v", args, err)
		}
		_ = srv.Stop()
	}
	t.Logf("extraArgs sequences tried %d (seed %d): accepted and run by memcached %d, rejected %d", tried, seed, accepted, tried-accepted)
	if accepted < tried/10 {
		t.Errorf("only %d of %d sequences were accepted: the generator no longer exercises the accepted side", accepted, tried)
	}

	// The bypasses a review found are refused, and memcached really reads
	// each as the managed option it spells, so refusing them is not
	// overcautious: run after the operator's flags, they override them.
	for _, c := range []struct {
		arg, setting, value string
	}{
		{"-Mm4096", "maxbytes", "4294967296"},
		{"--conn=100", "maxconns", "100"},
		{"--th=2", "num_threads", "2"},
		{"-vv", "verbosity", "2"},
		{"--max-i=2m", "item_size_max", "2097152"},
	} {
		mc := &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: "bypass", Namespace: h.namespace},
			Spec:       cachev1alpha1.MemcachedSpec{Memcached: &cachev1alpha1.MemcachedConfig{ExtraArgs: []string{c.arg}}},
		}
		err := h.c.Create(ctx, mc, client.DryRunAll)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.arg+" sets an option the operator manages") {
			t.Errorf("%s is not refused as a managed option: %v", c.arg, err)
		}
		srv, err := memcached.TryStart(append(slices.Clone(seedArgs), c.arg), memcached.Identity{UID: 11211, GID: 11211}, freePort(), nil)
		if err != nil {
			t.Errorf("memcached %s: %v", c.arg, err)
			continue
		}
		got, err := srv.Settings()
		_ = srv.Stop()
		if err != nil || got[c.setting] != c.value {
			t.Errorf("memcached reads %s as %s=%s (%v), want %s", c.arg, c.setting, got[c.setting], err, c.value)
		}
	}
}

// Option letters and long names of memcached 1.6 (memcached.c, shortopts
// and longopts, the same in 1.6.18 and 1.6.39).
var (
	shortLetters = []byte("aAZpsUmMckhiVrvdluPfntDLRCbBISFXWYeoN")
	longNames    = []string{"unix-mask", "enable-shutdown", "enable-ssl", "port", "unix-socket", "udp-port", "memory-limit",
		"disable-evictions", "conn-limit", "lock-memory", "help", "license", "version", "enable-coredumps", "verbose", "daemon",
		"listen", "user", "pidfile", "slab-growth-factor", "slab-min-size", "threads", "enable-largepages", "max-reqs-per-event",
		"disable-cas", "listen-backlog", "protocol", "max-item-size", "enable-sasl", "disable-flush-all", "disable-dumping",
		"disable-watch", "auth-file", "memory-file", "extended", "napi-ids"}
	values = []string{"1", "2", "20", "48", "4096", "0", "1.25", "0700", ":", "modern", "lru_crawler,hash_algorithm=xxh3",
		"slab_automove=2,slab_reassign", "slab_chunk_max=16384", "hashpower=20", "no_modern", "foo", "-M"}
)

// documentedOptions are the options extraArgs documents, each with values
// around what memcached accepts.
var documentedOptions = []struct {
	spellings, values []string
}{
	{[]string{"-A", "--enable-shutdown"}, nil},
	{[]string{"-M", "--disable-evictions"}, nil},
	{[]string{"-k", "--lock-memory"}, nil},
	{[]string{"-r", "--enable-coredumps"}, nil},
	{[]string{"-C", "--disable-cas"}, nil},
	{[]string{"-F", "--disable-flush-all"}, nil},
	{[]string{"-X", "--disable-dumping"}, nil},
	{[]string{"-W", "--disable-watch"}, nil},
	{[]string{"-a", "--unix-mask"}, []string{"0700", "777", "8", "0"}},
	{[]string{"-f", "--slab-growth-factor"}, []string{"1.25", "1.08", "2", "1.0", "1", "0.5", "100"}},
	{[]string{"-n", "--slab-min-size"}, []string{"48", "1", "99999", "0", "100000"}},
	{[]string{"-R", "--max-reqs-per-event"}, []string{"20", "1", "0", "99999"}},
	{[]string{"-b", "--listen-backlog"}, []string{"1024", "0", "99999"}},
	{[]string{"-D"}, []string{":", "::", "."}},
	{[]string{"-o", "--extended"}, []string{"modern", "lru_crawler,lru_maintainer", "hash_algorithm=murmur3", "hash_algorithm=md5",
		"slab_automove", "slab_automove=3", "slab_automove_ratio=1", "slab_automove_ratio=0.5", "slab_automove_window=2",
		"tail_repair_time=9", "tail_repair_time=10", "hot_lru_pct=40,warm_lru_pct=40", "hot_lru_pct=41", "hot_max_factor=0.1",
		"idle_timeout=0", "lru_crawler_sleep=1000000", "lru_crawler_sleep=1000001", "read_buf_mem_limit=0", "track_sizes",
		"no_maxconns_fast,maxconns_fast", "slab_chunk_max=524288", "no_modern", "modern,"}},
}

// randomTokens draws one to four groups of tokens: mostly options the field
// documents, with values drawn from pools that mix good and bad ones, and
// otherwise any of the shapes getopt_long reads.
func randomTokens(r *rand.Rand) []string {
	var out []string
	for range 1 + r.IntN(4) {
		if r.IntN(10) < 7 {
			opt := documentedOptions[r.IntN(len(documentedOptions))]
			out = append(out, opt.spellings[r.IntN(len(opt.spellings))])
			if len(opt.values) > 0 {
				out = append(out, opt.values[r.IntN(len(opt.values))])
			}
			continue
		}
		switch r.IntN(7) {
		case 0, 1: // -X, sometimes followed by a value
			out = append(out, "-"+string(shortLetters[r.IntN(len(shortLetters))]))
			if r.IntN(2) == 0 {
				out = append(out, values[r.IntN(len(values))])
			}
		case 2: // a cluster: -XY or -Xvalue
			tok := "-" + string(shortLetters[r.IntN(len(shortLetters))]) + string(shortLetters[r.IntN(len(shortLetters))])
			if r.IntN(2) == 0 {
				tok += values[r.IntN(len(values))]
			}
			out = append(out, tok)
		case 3, 4: // --name, --name value
			out = append(out, "--"+longNames[r.IntN(len(longNames))])
			if r.IntN(2) == 0 {
				out = append(out, values[r.IntN(len(values))])
			}
		case 5: // --name=value or an abbreviation
			name := longNames[r.IntN(len(longNames))]
			if r.IntN(2) == 0 {
				name = name[:1+r.IntN(len(name))]
			}
			out = append(out, "--"+name+"="+values[r.IntN(len(values))])
		default: // a stray value
			out = append(out, values[r.IntN(len(values))])
		}
	}
	return out
}
