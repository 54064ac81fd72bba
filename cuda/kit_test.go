package cuda_test

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

	"github.com/fedaudit/fedaudit/cuda/paritytest"
)

// TestKitBenchW1CPU and TestKitBenchW2CPU are the validation kit's CPU benchmarks (skipped
// unless FEDAUDIT_BENCH_R is set): W1 or W2 on the CPU backend at each requested replica
// count, on the same node as the GPU run so that the two can be compared.
func TestKitBenchW1CPU(t *testing.T) { kitBenchCPU(t, paritytest.W1) }
func TestKitBenchW2CPU(t *testing.T) { kitBenchCPU(t, paritytest.W2) }

func kitBenchCPU(t *testing.T, workload string) {
	replicas, rounds, ok, err := paritytest.BenchPlan(workload)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skipf("set %s to run", paritytest.BenchEnv)
	}
	dev := fmt.Sprintf("CPU backend, %d cores (GOMAXPROCS %d)", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	for _, r := range replicas {
		run := paritytest.RunW1
		if workload == paritytest.W2 {
			run = paritytest.RunW2
		}
		res, err := run(context.Background(), nil, nil, r, rounds)
		res.Backend, res.Device = "cpu", dev
		if err != nil {
			res.Error = err.Error()
			t.Errorf("R=%d: %v", r, err)
		}
		if aerr := paritytest.AppendBench(res); aerr != nil {
			t.Fatal(aerr)
		}
		t.Logf("%+v", res)
	}
}

// kitStep is one step of the kit's run.sh, from its steps.tsv.
type kitStep struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // pass, FAIL or skipped
	Seconds string `json:"seconds"`
	Note    string `json:"note,omitempty"`
}

// kitSummary is summary.json.
type kitSummary struct {
	Mode    string                   `json:"mode"` // gpu or shim
	GPUInfo json.RawMessage          `json:"gpu_info,omitempty"`
	Steps   []kitStep                `json:"steps"`
	Bench   []paritytest.BenchResult `json:"benchmarks"`
	Passed  bool                     `json:"passed"`
}

// TestKitSummary writes the kit's summary.md and summary.json from what run.sh left in
// FEDAUDIT_KIT_DIR (steps.tsv, bench.jsonl, gpu-info.json); skipped unless that is set. It is
// a test function so that the kit needs nothing but its binaries on the node.
func TestKitSummary(t *testing.T) {
	dir := os.Getenv("FEDAUDIT_KIT_DIR")
	if dir == "" {
		t.Skip("set FEDAUDIT_KIT_DIR to run")
	}
	s := kitSummary{Mode: os.Getenv("FEDAUDIT_KIT_MODE"), Passed: true}
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
		st := kitStep{Name: f[0], Status: f[1], Seconds: f[2]}
		if len(f) == 4 {
			st.Note = f[3]
		}
		s.Passed = s.Passed && st.Status != "FAIL"
		s.Steps = append(s.Steps, st)
	}
	if f, err := os.Open(filepath.Join(dir, "bench.jsonl")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r paritytest.BenchResult
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

func kitMarkdown(s kitSummary) string {
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
	for _, wl := range []string{paritytest.W1, paritytest.W2} {
		var bench []paritytest.BenchResult
		for _, r := range s.Bench {
			if r.Workload == wl || r.Workload == "" && wl == paritytest.W1 {
				bench = append(bench, r)
			}
		}
		benchMarkdown(&b, wl, bench)
	}
	return b.String()
}

// benchMarkdown writes the table of one workload's results and the speed-ups over the CPU.
func benchMarkdown(b *strings.Builder, workload string, bench []paritytest.BenchResult) {
	if len(bench) > 0 {
		rate := "GEMM GFLOP/s: the dense layers' products per second (traintest.RunW1's count)"
		if workload == paritytest.W2 {
			rate = "GEMM GFLOP/s: the reference's nominal count, 3 x LeNet-5's forward FLOPs per image, per second"
		}
		fmt.Fprintf(b, "\n## %s benchmark\n\nreplica-rounds/s: replicas x rounds per second (the benchmark's metric); %s; of SGEMM peak: that rate over the device's own SGEMM rate on 4096^3 products.\n\n", workload, rate)
		b.WriteString("| backend | replicas | rounds | seconds | replica-rounds/s | GEMM GFLOP/s | of SGEMM peak | memory used | error |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range bench {
			peak, mem := "", ""
			if r.SGEMMPeak > 0 {
				peak = fmt.Sprintf("%.1f%% of %.0f", 100*r.OfPeak, r.SGEMMPeak)
			}
			if r.MemoryUsed > 0 {
				mem = fmt.Sprintf("%.2f GiB", float64(r.MemoryUsed)/(1<<30))
			}
			fmt.Fprintf(b, "| %s | %d | %d | %.3f | %.1f | %.2f | %s | %s | %s |\n",
				r.Backend, r.Replicas, r.Rounds, r.Seconds, r.ReplicaRoundsPerSec, r.GEMMGFlops, peak, mem, r.Error)
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
}

// The summary of a small made-up kit directory: every step, the benchmark table, the speed-up
// and the failure verdict.
func TestKitSummaryWrites(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "steps.tsv"), []byte("gpu-info\tpass\t1\t\nparity\tFAIL\t2\tsee parity.log\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bench.jsonl"), []byte(
		`{"backend":"cpu","device":"c","replicas":64,"rounds":20,"seconds":2,"replica_rounds_per_s":640,"gemm_gflops":1}`+"\n"+
			`{"backend":"gpu","device":"g","replicas":64,"rounds":20,"seconds":1,"replica_rounds_per_s":1280,"gemm_gflops":2,"sgemm_peak_gflops":100,"of_sgemm_peak":0.02}`+"\n"+
			`{"workload":"W2","backend":"cpu","device":"c","replicas":64,"rounds":10,"seconds":64,"replica_rounds_per_s":10,"gemm_gflops":1}`+"\n"+
			`{"workload":"W2","backend":"gpu","device":"g","replicas":64,"rounds":10,"seconds":12.8,"replica_rounds_per_s":50,"gemm_gflops":5}`+"\n"), 0o644)
	t.Setenv("FEDAUDIT_KIT_DIR", dir)
	t.Setenv("FEDAUDIT_KIT_MODE", "gpu")
	TestKitSummary(t)
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SOME STEPS FAILED", "| parity | FAIL | 2 | see parity.log |", "## W1 benchmark",
		"| gpu | 64 | 20 | 1.000 | 1280.0 | 2.00 | 2.0% of 100 |", "| 64 | gpu 2.00x |", "## W2 benchmark", "| gpu | 64 | 10 | 12.800 | 50.0 | 5.00 |", "| 64 | gpu 5.00x |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
	// Each workload's speed-up is taken against its own CPU row.
	if w2 := string(md)[strings.Index(string(md), "## W2 benchmark"):]; strings.Contains(w2, "gpu 2.00x") || strings.Index(string(md), "gpu 5.00x") < strings.Index(string(md), "## W2") {
		t.Errorf("speed-ups are not per workload:\n%s", md)
	}
	var s kitSummary
	js, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err := json.Unmarshal(js, &s); err != nil || s.Passed || len(s.Bench) != 4 || len(s.Steps) != 2 {
		t.Errorf("summary.json: %v %+v", err, s)
	}
}
