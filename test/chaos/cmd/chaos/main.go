// Command chaos runs every fault scenario of test/chaos at full size and
// the builders' fuzz target, and writes docs/reliability.md.
//
//	make chaos                                  # everything (~1 h on 2 cores)
//	go run ./test/chaos/cmd/chaos -only drift -out ''   # one scenario, to stdout
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/memcached-operator/test/chaos"
	"github.com/example/memcached-operator/test/internal/repo"
)

var scenarios = []string{"failover", "outage", "drift", "permissions", "admission", "upgrade", "overload", "fuzz"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run() error {
	runs := flag.Int("runs", 3, "runs of the scenarios timed as a whole (failover, outage); the report shows medians")
	out := flag.String("out", "docs/reliability.md", "where to write the report (empty: stdout only)")
	only := flag.String("only", strings.Join(scenarios, ","), "comma-separated scenarios to run: "+strings.Join(scenarios, ", "))
	fuzzExecs := flag.Int("fuzz-execs", 1_000_000, "executions of the builders' fuzz target")
	merge := flag.String("merge", "", "start from the raw results of an earlier run (its chaos-results.json): the scenarios run now replace theirs")
	flag.Parse()
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if strings.TrimSpace(s) == "" {
			continue // -only '' with -merge: render the earlier results again
		}
		if !slices.Contains(scenarios, strings.TrimSpace(s)) {
			return fmt.Errorf("-only: unknown scenario %q; choose from %s", s, strings.Join(scenarios, ", "))
		}
		want[strings.TrimSpace(s)] = true
	}

	start := time.Now()
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "chaos: [%s] %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	sc := chaos.Full
	r := &chaos.Report{Runs: *runs}
	if *merge != "" {
		raw, err := os.ReadFile(*merge)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, r); err != nil {
			return fmt.Errorf("-merge %s: %w", *merge, err)
		}
		start = start.Add(-r.Took)
	}
	var err error
	if want["failover"] {
		r.Failover = nil
		for i := range *runs {
			progress("leader failover, run %d of %d", i+1, *runs)
			f, err := chaos.Failover(sc, progress)
			if err != nil {
				return fmt.Errorf("leader failover: %w", err)
			}
			r.Failover = append(r.Failover, f)
		}
	}
	if want["outage"] {
		r.Outages = nil
		for _, target := range chaos.OutageTargets {
			var results []chaos.OutageResult
			for i := range *runs {
				progress("outage of %s, run %d of %d", strings.Join(target, " and "), i+1, *runs)
				o, err := chaos.Outage(sc, target, progress)
				if err != nil {
					return fmt.Errorf("outage: %w", err)
				}
				results = append(results, o)
			}
			r.Outages = append(r.Outages, results)
		}
	}
	if want["drift"] {
		progress("chaos drift")
		if r.Drift, err = chaos.Drift(sc, progress); err != nil {
			return fmt.Errorf("drift: %w", err)
		}
	}
	if want["permissions"] {
		progress("lost permissions")
		if r.Permission, err = chaos.LostPermission(sc, progress); err != nil {
			return fmt.Errorf("lost permissions: %w", err)
		}
	}
	if want["admission"] {
		progress("admission rejections")
		if r.Admission, err = chaos.AdmissionRejection(sc, progress); err != nil {
			return fmt.Errorf("admission: %w", err)
		}
	}
	if want["upgrade"] {
		progress("operator upgrade")
		if r.Upgrade, err = chaos.Upgrade(sc, progress); err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
	}
	if want["overload"] {
		progress("overload")
		if r.Overload, err = chaos.Overload(sc, progress); err != nil {
			return fmt.Errorf("overload: %w", err)
		}
	}
	if want["fuzz"] {
		progress("fuzzing the builders for %d execs", *fuzzExecs)
		if r.Fuzz, err = fuzz(*fuzzExecs, progress); err != nil {
			return err
		}
	}
	r.Took = time.Since(start)

	// The raw figures first: a report can be rendered again from them.
	if raw, err := json.MarshalIndent(r, "", "  "); err == nil {
		path := filepath.Join(os.TempDir(), "chaos-results.json")
		if err := os.WriteFile(path, raw, 0o644); err == nil {
			progress("raw results in %s", path)
		}
	}
	report := r.Markdown(time.Now().UTC().Format("2006-01-02"))
	fmt.Print(report)
	if *out != "" {
		root, err := repo.Root()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, *out), []byte(report), 0o644); err != nil {
			return err
		}
		progress("wrote %s", *out)
	}
	if problems := r.Problems(); len(problems) > 0 {
		return fmt.Errorf("%d problems, listed in the report", len(problems))
	}
	return nil
}

var fuzzLine = regexp.MustCompile(`^fuzz: elapsed: (\S+), execs: (\d+)`)

// fuzz runs the builders' fuzz target for execs executions, printing its
// progress every half minute.
func fuzz(execs int, progress func(string, ...any)) (chaos.FuzzResult, error) {
	res := chaos.FuzzResult{Target: "FuzzBuilders"}
	root, err := repo.Root()
	if err != nil {
		return res, err
	}
	cmd := exec.Command("go", "test", "-run", "^$", "-fuzz", "^FuzzBuilders$", "-fuzztime", fmt.Sprintf("%dx", execs), "./internal/resources/")
	cmd.Dir = filepath.Join(root, "operator")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return res, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); _ = pw.Close() }()
	var output strings.Builder
	last := time.Now()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		if m := fuzzLine.FindStringSubmatch(line); m != nil {
			res.Elapsed = m[1]
			res.Execs, _ = strconv.Atoi(m[2])
			if time.Since(last) > 30*time.Second {
				progress("%s", line)
				last = time.Now()
			}
			continue
		}
		output.WriteString(line + "\n")
	}
	if err := <-done; err != nil {
		res.Failed = true
		res.Output = output.String()
		progress("fuzzing failed:\n%s", res.Output)
	}
	return res, nil
}
