package cuda_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
			`{"backend":"gpu","device":"g","replicas":64,"rounds":20,"seconds":1,"replica_rounds_per_s":1280,"first_round_seconds":0.05,"steady_replica_rounds_per_s":1280,"gemm_gflops":2,"sgemm_peak_gflops":100,"of_sgemm_peak":0.02}`+"\n"+
			`{"workload":"W2","backend":"cpu","device":"c","replicas":64,"rounds":10,"seconds":64,"replica_rounds_per_s":10,"gemm_gflops":1}`+"\n"+
			`{"workload":"W2","backend":"gpu","device":"g","replicas":64,"rounds":10,"seconds":12.8,"replica_rounds_per_s":50,"gemm_gflops":5}`+"\n"+
			`{"workload":"W3","backend":"gpu","device":"g","replicas":32,"rounds":2,"seconds":4,"replica_rounds_per_s":16,"gemm_gflops":900}`+"\n"+
			profiledRow(17)+"\n"), 0o644)
	t.Setenv("FEDAUDIT_KIT_DIR", dir)
	t.Setenv("FEDAUDIT_KIT_MODE", "gpu")
	paritytest.WriteKitSummary(t)
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The profiled W2 run: its 15 largest operations with their shares of the 3.4 s profiled
	// (0.36 / 3.4 = 10.6%), the other 2 (0.06 s in 5 calls and 0.04 s in 4) in one line.
	for _, want := range []string{"### W2 profile: gpu+profile, 1024 replicas", "3.400 s in 204 calls, against 3.000 s of wall clock for the 1 timed rounds",
		"| op00 | 20 | 0.3600 | 10.6% | 18000.0 |", "| op14 | 6 | 0.0800 | 2.4% | 13333.3 |", "| the other 2 | 9 | 0.1000 | 2.9% | 11111.1 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
	for _, want := range []string{"SOME STEPS FAILED", "| parity | FAIL | 2 | see parity.log |", "## W1 benchmark",
		"| gpu | 64 | 20 | 1.000 | 1280.0 | 0.0500 | 1280.0 | 2.00 | 2.0% of 100 |", "| 64 | gpu 2.00x |", "## W2 benchmark", "| gpu | 64 | 10 | 12.800 | 50.0 |  |  | 5.00 |", "| 64 | gpu 5.00x |", "## W3 benchmark", "| gpu | 32 | 2 | 4.000 | 16.0 |  |  | 900.00 |", "3 x ResNet-18's forward FLOPs"} {
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
	if err := json.Unmarshal(js, &s); err != nil || s.Passed || len(s.Bench) != 6 || len(s.Steps) != 2 || len(s.Bench[5].Profile) != 17 {
		t.Errorf("summary.json: %v %+v", err, s)
	}
}

// profiledRow is a bench.jsonl line of a profiled W2 run with n operations: op00 takes 0.36 s
// in 20 calls, and each next one 0.02 s and one call less (n = 17: down to 0.04 s in 4 calls;
// 3.4 s and 204 calls in all).
func profiledRow(n int) string {
	var ops []string
	for i := range n {
		ops = append(ops, fmt.Sprintf(`{"op":"op%02d","calls":%d,"seconds":%g}`, i, 20-i, 0.36-0.02*float64(i)))
	}
	return `{"workload":"W2","backend":"gpu+profile","device":"g","replicas":1024,"rounds":1,"seconds":3,"replica_rounds_per_s":341,"gemm_gflops":1,"profile":[` +
		strings.Join(ops, ",") + `]}`
}

// run.sh --only: the steps not listed are recorded as skipped and not run.
func TestKitStepsOnly(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skipf("no bash: %v", err)
	}
	out := t.TempDir()
	script := `set -uo pipefail
out=$1
step_timeout=0
only=b,c
. kit/steps.sh
: > "$out/steps.tsv"
step a "not listed" touch "$out/a-ran"
step b "listed" true
step c "listed, fails" false
echo "failed=$failed"
`
	stdout, err := exec.Command("bash", "-c", script, "kit-test", out).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	tsv, _ := os.ReadFile(filepath.Join(out, "steps.tsv"))
	lines := strings.Split(strings.TrimSpace(string(tsv)), "\n")
	want := []string{"a\tskipped\t0\tnot in --only", "b\tpass\t", "c\tFAIL\t"}
	if len(lines) != len(want) {
		t.Fatalf("steps.tsv:\n%s", tsv)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("steps.tsv line %d: %q, want it to start %q", i+1, lines[i], w)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "a-ran")); err == nil {
		t.Error("step a ran though not in --only")
	}
	if !strings.Contains(string(stdout), "failed=1") {
		t.Errorf("a listed step's failure was not counted:\n%s", stdout)
	}
}

// The kit's step runner (cuda/kit/steps.sh, sourced by run.sh) with fake steps: a step past
// its time limit is stopped with every process it started (a grandchild included) and
// recorded as failed, "timed out"; a function step's commands share the step's limit; a plain
// failure keeps its exit status; the summary says so; and archive packs the whole results
// folder into OUT/kit-results.tgz (issue 27: the steps had no limit, and the results came back
// from a batch node as many files).
func TestKitStepsTimeOutAndArchive(t *testing.T) {
	for _, tool := range []string{"bash", "timeout", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	out := filepath.Join(t.TempDir(), "results")
	script := `set -uo pipefail
out=$1
step_timeout=2
. kit/steps.sh
mkdir -p "$out"
: > "$out/steps.tsv"
slow_fn() {
  lim true && lim sleep 1 && lim sleep 60
}
step fast "a quick step" true
step slow "sleeps past the limit" bash -c 'sleep 60 & echo $! > "$0/grandchild.pid"; wait' "$out"
step slow-fn "a function step past the limit" slow_fn
step failing "exits 3" bash -c 'echo failing on purpose; exit 3'
skip other "not here"
echo "failed=$failed"
trap 'echo interrupted' INT
step_deadline=$((SECONDS + 5))
lim true
step_deadline=0
echo "after lim: $(trap -p INT)"
`
	start := time.Now()
	cmd := exec.Command("bash", "-c", script, "kit-test", out)
	stdout, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	t.Logf("%s", stdout)
	if took > 20*time.Second {
		t.Errorf("the steps took %v: the 2 s limits did not stop them", took)
	}
	if !strings.Contains(string(stdout), "failed=1") {
		t.Errorf("failed is not set")
	}
	// lim puts back the caller's trap (run.sh's, which packs the archive on an interrupt).
	if !strings.Contains(string(stdout), "after lim: trap -- 'echo interrupted' SIGINT") {
		t.Errorf("lim did not restore the caller's INT trap")
	}
	checkStepsRecorded(t, out)
	checkGrandchildGone(t, out)
	checkSummaryAndArchive(t, out)
}

// checkStepsRecorded checks what the steps of TestKitStepsTimeOutAndArchive recorded in out:
// each step's line in steps.tsv (status and note) and the timed-out step's log. It is its own
// piece because it reads the step runner's records, after the run that made them.
func checkStepsRecorded(t *testing.T, out string) {
	t.Helper()
	tsv, err := os.ReadFile(filepath.Join(out, "steps.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(tsv)), "\n")
	want := []struct{ name, status, note string }{
		{"fast", "pass", "a quick step"},
		{"slow", "FAIL", `^timed out after [23] s \(step limit 2 s, --step-timeout\); see slow.log. sleeps past the limit$`},
		{"slow-fn", "FAIL", `^timed out after [23] s .*a function step past the limit$`},
		{"failing", "FAIL", `^exit 3; see failing.log. exits 3$`},
		{"other", "skipped", `^not here$`},
	}
	if len(lines) != len(want) {
		t.Fatalf("steps.tsv:\n%s", tsv)
	}
	for i, w := range want {
		f := strings.Split(lines[i], "\t")
		if len(f) != 4 || f[0] != w.name || f[1] != w.status || !regexp.MustCompile(w.note).MatchString(f[3]) {
			t.Errorf("steps.tsv line %d: %q, want %s %s %s", i+1, lines[i], w.name, w.status, w.note)
		}
	}
	if log, _ := os.ReadFile(filepath.Join(out, "slow.log")); !strings.Contains(string(log), "past its time limit of 2 s") {
		t.Errorf("slow.log does not say the step was stopped:\n%s", log)
	}
}

// checkGrandchildGone checks that the slow step's grandchild (the sleep the step's bash
// started, its pid in out/grandchild.pid) is gone too: timeout kills the step's whole process
// group. It is its own piece because it waits on a process, not on the records.
func checkGrandchildGone(t *testing.T, out string) {
	t.Helper()
	pidText, err := os.ReadFile(filepath.Join(out, "grandchild.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the slow step's grandchild %d outlived the step", pid)
		}
	}
}

// checkSummaryAndArchive checks that the kit summary of the steps in out reports the timeout
// and that archive packs everything, itself excepted. It is its own piece because it runs
// the kit's later stages (summary, archive) on the steps' results.
func checkSummaryAndArchive(t *testing.T, out string) {
	t.Helper()
	t.Setenv("FEDAUDIT_KIT_DIR", out)
	t.Setenv("FEDAUDIT_KIT_MODE", "shim")
	paritytest.WriteKitSummary(t)
	md, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	if !strings.Contains(string(md), "SOME STEPS FAILED") || !regexp.MustCompile(`\| slow \| FAIL \| [23] \| timed out after [23] s`).Match(md) {
		t.Errorf("summary.md:\n%s", md)
	}
	os.WriteFile(filepath.Join(out, "kit-results.tgz"), []byte("an older archive"), 0o644)
	if b, err := exec.Command("bash", "-c", "out=$1; . kit/steps.sh; archive", "kit-test", out).CombinedOutput(); err != nil {
		t.Fatalf("archive: %v\n%s", err, b)
	}
	names := tgzNames(t, filepath.Join(out, "kit-results.tgz"))
	for _, n := range []string{"results/steps.tsv", "results/summary.md", "results/summary.json", "results/fast.log", "results/slow.log", "results/slow-fn.log", "results/failing.log"} {
		if !slices.Contains(names, n) {
			t.Errorf("kit-results.tgz lacks %s: %v", n, names)
		}
	}
	if slices.Contains(names, "results/kit-results.tgz") {
		t.Errorf("kit-results.tgz contains itself: %v", names)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	i := strings.LastIndexByte(string(st), ')')
	return i < 0 || i+2 >= len(st) || st[i+2] != 'Z'
}

func tgzNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(z)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimPrefix(h.Name, "./"))
	}
	return names
}
