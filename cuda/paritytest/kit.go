package paritytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// KitBenchCPU is the validation kit's CPU benchmark (skipped unless FEDAUDIT_BENCH_R is set):
// W1 or W2 (workload) on the CPU backend at each requested replica count, on the same node as
// the GPU run so that the two can be compared. Test functions of the kit's binaries call it.
func KitBenchCPU(t *testing.T, workload string) {
	replicas, rounds, ok, err := BenchPlan(workload)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skipf("set %s to run", BenchEnv)
	}
	dev := fmt.Sprintf("CPU backend, %d cores (GOMAXPROCS %d)", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	for _, r := range replicas {
		run := RunW1
		if workload == W2 {
			run = RunW2
		}
		res, err := run(context.Background(), nil, nil, r, rounds)
		res.Backend, res.Device = "cpu", dev
		if err != nil {
			res.Error = err.Error()
			t.Errorf("R=%d: %v", r, err)
		}
		if aerr := AppendBench(res); aerr != nil {
			t.Fatal(aerr)
		}
		t.Logf("%+v", res)
	}
}

// KitStep is one step of the kit's run.sh, from its steps.tsv.
type KitStep struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // pass, FAIL or skipped
	Seconds string `json:"seconds"`
	Note    string `json:"note,omitempty"`
}

// KitSummary is summary.json.
type KitSummary struct {
	Mode    string          `json:"mode"` // gpu or shim
	GPUInfo json.RawMessage `json:"gpu_info,omitempty"`
	Steps   []KitStep       `json:"steps"`
	Bench   []BenchResult   `json:"benchmarks"`
	Passed  bool            `json:"passed"`
}

// WriteKitSummary writes the kit's summary.md and summary.json from what run.sh left in
// FEDAUDIT_KIT_DIR (steps.tsv, bench.jsonl, gpu-info.json); skipped unless that is set. Test
// functions of the kit's binaries call it, so that the kit needs nothing but its binaries on
// the node.
func WriteKitSummary(t *testing.T) {
	dir := os.Getenv("FEDAUDIT_KIT_DIR")
	if dir == "" {
		t.Skip("set FEDAUDIT_KIT_DIR to run")
	}
	s := KitSummary{Mode: os.Getenv("FEDAUDIT_KIT_MODE"), Passed: true}
	if b, err := os.ReadFile(filepath.Join(dir, "gpu-info.json")); err == nil && json.Valid(bytes.TrimSpace(b)) {
		s.GPUInfo = json.RawMessage(bytes.TrimSpace(b))
	}
	steps, err := os.ReadFile(filepath.Join(dir, "steps.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(steps)), "\n") {
		f := strings.SplitN(line, "\t", 4)
		if len(f) < 3 {
			continue
		}
		st := KitStep{Name: f[0], Status: f[1], Seconds: f[2]}
		if len(f) == 4 {
			st.Note = f[3]
		}
		s.Passed = s.Passed && st.Status != "FAIL"
		s.Steps = append(s.Steps, st)
	}
	if f, err := os.Open(filepath.Join(dir, "bench.jsonl")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r BenchResult
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Errorf("bench.jsonl: %v", err)
				continue
			}
			s.Bench = append(s.Bench, r)
		}
		f.Close()
	}
	js, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(kitMarkdown(s)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func kitMarkdown(s KitSummary) string {
	var b strings.Builder
	verdict := "all steps passed"
	if !s.Passed {
		verdict = "SOME STEPS FAILED"
	}
	fmt.Fprintf(&b, "# GPU validation kit: %s mode, %s\n\n", s.Mode, verdict)
	if len(s.GPUInfo) > 0 {
		var info map[string]any
		if json.Unmarshal(s.GPUInfo, &info) == nil {
			keys := make([]string, 0, len(info))
			for k := range info {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			b.WriteString("## Device (audit gpu-info)\n\n| field | value |\n|---|---|\n")
			for _, k := range keys {
				fmt.Fprintf(&b, "| %s | %v |\n", k, info[k])
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("## Steps\n\n| step | status | seconds | note |\n|---|---|---|---|\n")
	for _, st := range s.Steps {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", st.Name, st.Status, st.Seconds, st.Note)
	}
	for _, wl := range []string{W1, W2, W3} {
		var bench []BenchResult
		for _, r := range s.Bench {
			if r.Workload == wl || r.Workload == "" && wl == W1 {
				bench = append(bench, r)
			}
		}
		benchMarkdown(&b, wl, bench)
	}
	return b.String()
}

// benchMarkdown writes the table of one workload's results and the speed-ups over the CPU.
func benchMarkdown(b *strings.Builder, workload string, bench []BenchResult) {
	if len(bench) > 0 {
		rate := "GEMM GFLOP/s: the dense layers' products per second (traintest.RunW1's count)"
		switch workload {
		case W2:
			rate = "GEMM GFLOP/s: the reference's nominal count, 3 x LeNet-5's forward FLOPs per image, per second"
		case W3:
			rate = "GEMM GFLOP/s: the nominal count, 3 x ResNet-18's forward FLOPs per image, per second"
		}
		fmt.Fprintf(b, "\n## %s benchmark\n\nreplica-rounds/s: replicas x rounds per second (the benchmark's metric); round 1 s: the seconds to the end of the first round, the set-up included; after round 1: the replica-rounds/s of the rounds after it; %s; of SGEMM peak: that rate over the device's own SGEMM rate on 4096^3 products.\n\n", workload, rate)
		b.WriteString("| backend | replicas | rounds | seconds | replica-rounds/s | round 1 s | after round 1 | GEMM GFLOP/s | of SGEMM peak | memory used | error |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range bench {
			peak, mem := "", ""
			if r.SGEMMPeak > 0 {
				peak = fmt.Sprintf("%.1f%% of %.0f", 100*r.OfPeak, r.SGEMMPeak)
			}
			if r.MemoryUsed > 0 {
				mem = fmt.Sprintf("%.2f GiB", float64(r.MemoryUsed)/(1<<30))
			}
			first, steady := "", ""
			if r.FirstRoundSeconds > 0 {
				first = fmt.Sprintf("%.4f", r.FirstRoundSeconds)
			}
			if r.SteadyReplicaRoundsPerSec > 0 {
				steady = fmt.Sprintf("%.1f", r.SteadyReplicaRoundsPerSec)
			}
			fmt.Fprintf(b, "| %s | %d | %d | %.3f | %.1f | %s | %s | %.2f | %s | %s | %s |\n",
				r.Backend, r.Replicas, r.Rounds, r.Seconds, r.ReplicaRoundsPerSec, first, steady, r.GEMMGFlops, peak, mem, r.Error)
		}
		// GPU over CPU at equal replica counts.
		cpu := map[int]float64{}
		for _, r := range bench {
			if r.Backend == "cpu" && r.Error == "" {
				cpu[r.Replicas] = r.ReplicaRoundsPerSec
			}
		}
		first := true
		for _, r := range bench {
			if c, ok := cpu[r.Replicas]; ok && r.Backend != "cpu" && r.Error == "" && c > 0 {
				if first {
					b.WriteString("\n| replicas | speed-up over the CPU backend |\n|---|---|\n")
					first = false
				}
				fmt.Fprintf(b, "| %d | %s %.2fx |\n", r.Replicas, r.Backend, r.ReplicaRoundsPerSec/c)
			}
		}
		if len(bench) > 0 {
			fmt.Fprintf(b, "\nDevices: ")
			seen := map[string]bool{}
			var ds []string
			for _, r := range bench {
				if !seen[r.Device] {
					seen[r.Device] = true
					ds = append(ds, r.Backend+": "+r.Device)
				}
			}
			b.WriteString(strings.Join(ds, "; ") + "\n")
		}
	}
	for _, r := range bench {
		profileMarkdown(b, workload, r)
	}
}

// profileTop is how many operations a profile table lists before "the rest".
const profileTop = 15

// profileMarkdown writes where a profiled run's device time went: the largest operations with
// their share of the profiled total, and the rest in one line.
func profileMarkdown(b *strings.Builder, workload string, r BenchResult) {
	if len(r.Profile) == 0 {
		return
	}
	total, calls := 0.0, 0
	for _, p := range r.Profile {
		total += p.Seconds
		calls += p.Calls
	}
	fmt.Fprintf(b, "\n### %s profile: %s, %d replicas\n\n", workload, r.Backend, r.Replicas)
	fmt.Fprintf(b, "Device time of each kind of operation over the whole run (its warm-up round and checkpoint evaluation included): %.3f s in %d calls, against %.3f s of wall clock for the %d timed rounds.\n\n",
		total, calls, r.Seconds, r.Rounds)
	b.WriteString("| operation | calls | device s | share | us per call |\n|---|---|---|---|---|\n")
	row := func(op string, n int, sec float64) {
		share, per := 0.0, 0.0
		if total > 0 {
			share = 100 * sec / total
		}
		if n > 0 {
			per = 1e6 * sec / float64(n)
		}
		fmt.Fprintf(b, "| %s | %d | %.4f | %.1f%% | %.1f |\n", op, n, sec, share, per)
	}
	for _, p := range r.Profile[:min(profileTop, len(r.Profile))] {
		row(p.Op, p.Calls, p.Seconds)
	}
	if len(r.Profile) > profileTop {
		n, sec := 0, 0.0
		for _, p := range r.Profile[profileTop:] {
			n += p.Calls
			sec += p.Seconds
		}
		row(fmt.Sprintf("the other %d", len(r.Profile)-profileTop), n, sec)
	}
}
