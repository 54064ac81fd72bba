package cuda_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/cuda/paritytest"
)

// TestKitBenchW1CPU and TestKitBenchW2CPU are the validation kit's CPU benchmarks in the gpu
// test binary (paritytest.KitBenchCPU); TestKitSummary writes its summary
// (paritytest.WriteKitSummary). The shim's test binary has the same three, for --shim mode.
func TestKitBenchW1CPU(t *testing.T) { paritytest.KitBenchCPU(t, paritytest.W1) }
func TestKitBenchW2CPU(t *testing.T) { paritytest.KitBenchCPU(t, paritytest.W2) }
func TestKitSummary(t *testing.T)    { paritytest.WriteKitSummary(t) }

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
	paritytest.WriteKitSummary(t)
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
	var s paritytest.KitSummary
	js, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err := json.Unmarshal(js, &s); err != nil || s.Passed || len(s.Bench) != 4 || len(s.Steps) != 2 {
		t.Errorf("summary.json: %v %+v", err, s)
	}
}
