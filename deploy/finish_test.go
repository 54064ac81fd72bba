package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFinishSequenceAgreesWithRun trains an experiment the way a cluster does (one `audit train`
// per array task, with the task index in the environment), runs the finish job's script on it
// (deploy/slurm/finish.sbatch with bash, the Kubernetes finish job's script with sh -e), and
// checks that its verdict, exit status, findings.json and analysis.json are those of a
// one-process `audit run` of the same config: for a claim the audit finds violated and for one
// it does not, and for a one-run audit (one training with canaries, its claim an epsilon) in
// one shard. The claim lives only in the config, so a finish step that forgot it would judge
// the theory's bound instead and disagree.
func TestFinishSequenceAgreesWithRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the CLI end to end")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := buildAudit(t)
	testdata := func(name string) string {
		raw, err := os.ReadFile(filepath.Join("..", "cmd", "audit", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	small := strings.NewReplacer("pairs: 40", "pairs: 200", "noise_std: 0.05", "noise_std: 0.01").Replace(testdata("run_small.yaml"))
	k8s := readObjects(t)["Job/fedaudit-finish"].Spec.Template.Spec.Containers[0].Args[0]
	for _, tc := range []struct {
		name     string
		config   string
		shards   int
		verdict  string
		exitCode int
	}{
		// sigma 0.01 over 3 rounds leaks far more than mu 0.3: the informed adversary and the
		// loss attack certify about 1.8 with 200 pairs.
		{"violated", small + "  claim_mu: 0.3\n", 2, "violated", 3},
		{"consistent", small + "  claim_mu: 50\n", 2, "consistent", 0},
		// A claim of mu 2.1 about each upload, with the informed adversary of the uploads
		// among the attacks: it certifies about 2.26 at T = 3 (violated), while the rows of
		// the models certify about 2.0; a step that dropped claim_about would judge 2.1 about
		// the models and find it consistent.
		{"claim-about-uploads", strings.Replace(small, "attacks: [informed-all, loss]", "attacks: [informed-all, loss, informed-upload]", 1) +
			"  claim_mu: 2.1\n  claim_about: uploads\n", 2, "violated", 3},
		// One training of 300 canary clients certifies more than its claim of epsilon 1.
		{"one-run", testdata("run_onerun.yaml"), 1, "violated", 3},
		// Every run diverges (learning rate 1e30): no verdict, exit status 4, which the finish
		// jobs must pass on like 3 rather than fail on (issue 24 item 2).
		{"inconclusive", strings.Replace(small, "learning_rate: 0.1", "learning_rate: 1e30", 1), 2, "inconclusive", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			config := filepath.Join(work, "audit.yaml")
			if err := os.WriteFile(config, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			single := filepath.Join(work, "single")
			code, _ := runCmd(t, nil, bin, "run", "--quiet", "--config", config, "--out", single)
			if code != tc.exitCode {
				t.Fatalf("audit run exited %d, want %d", code, tc.exitCode)
			}
			if got := headlineStatus(t, filepath.Join(single, "findings.json")); got != tc.verdict {
				t.Fatalf("audit run: headline %q, want %q", got, tc.verdict)
			}
			want, wantAnalysis := readFile(t, filepath.Join(single, "findings.json")), analyzeJSON(t, bin, single)

			for _, finish := range []struct {
				name  string
				shell []string
			}{
				{"slurm", []string{"bash", filepath.Join("slurm", "finish.sbatch")}},
				{"k8s", []string{"sh", "-ec", k8s}},
			} {
				out := filepath.Join(work, finish.name)
				shards := tc.shards
				for i := 0; i < shards; i++ {
					env := []string{"SLURM_ARRAY_TASK_ID=" + fmt.Sprint(i)}
					if code, o := runCmd(t, env, bin, "train", "--quiet", "--config", config, "--out", out, "--shards", fmt.Sprint(shards)); code != 0 {
						t.Fatalf("%s: train task %d exited %d: %s", finish.name, i, code, o)
					}
				}
				env := []string{"CONFIG=" + config, "OUT=" + out, "SHARDS=" + fmt.Sprint(shards), "AUDIT=" + bin,
					"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")}
				code, o := runCmd(t, env, finish.shell[0], finish.shell[1:]...)
				if code != tc.exitCode {
					t.Fatalf("%s finish job exited %d, want %d (as audit run): %s", finish.name, code, tc.exitCode, o)
				}
				if got := headlineStatus(t, filepath.Join(out, "findings.json")); got != tc.verdict {
					t.Errorf("%s finish job: headline %q, want %q", finish.name, got, tc.verdict)
				}
				if got := readFile(t, filepath.Join(out, "findings.json")); !bytes.Equal(got, want) {
					t.Errorf("%s finish job: findings.json differs from audit run's", finish.name)
				}
				if got := readFile(t, filepath.Join(out, "analysis.json")); !bytes.Equal(got, wantAnalysis) {
					t.Errorf("%s finish job: analysis.json differs from `audit analyze --json` of audit run's directory:\n%s\nwant\n%s", finish.name, got, wantAnalysis)
				}
				// The report, written from the same analysis, states the same verdict.
				code, o = runCmd(t, nil, bin, "report", "--quiet", out)
				if code != tc.exitCode || !strings.Contains(o, strings.ToUpper(tc.verdict)+":") {
					t.Errorf("%s: audit report exited %d, want %d with a %s headline: %s", finish.name, code, tc.exitCode, tc.verdict, o)
				}
				// A resubmitted finish job over a score file cut short (a full disk) scores
				// the runs again and ends as before: its
				// status step checked the score files too and failed the job for good.
				if scores := filepath.Join(out, "scores.arrow"); tc.name != "one-run" {
					raw := readFile(t, scores)
					if err := os.WriteFile(scores, raw[:len(raw)/2], 0o644); err != nil {
						t.Fatal(err)
					}
					if code, o := runCmd(t, env, finish.shell[0], finish.shell[1:]...); code != tc.exitCode {
						t.Errorf("%s finish job over a cut score file exited %d, want %d: %s", finish.name, code, tc.exitCode, o)
					} else if got := readFile(t, filepath.Join(out, "findings.json")); !bytes.Equal(got, want) {
						t.Errorf("%s finish job over a cut score file: findings.json differs from audit run's", finish.name)
					}
				}
				// A job that fails leaves no analysis.json: the last one was judged with
				// settings the failed run may have replaced.
				if err := os.RemoveAll(filepath.Join(out, "runs")); err != nil {
					t.Fatal(err)
				}
				if code, o := runCmd(t, env, finish.shell[0], finish.shell[1:]...); code != 1 {
					t.Errorf("%s finish job without run files exited %d, want 1: %s", finish.name, code, o)
				}
				if _, err := os.Stat(filepath.Join(out, "analysis.json")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s finish job that failed left analysis.json (%v)", finish.name, err)
				}
			}
		})
	}
}

// runCmd runs a command with extra environment variables and returns its exit status and
// combined output; a command that cannot start fails the test.
func runCmd(t *testing.T, env []string, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	case err != nil:
		t.Fatalf("%s: %v", name, err)
	}
	return 0, string(out)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func headlineStatus(t *testing.T, path string) string {
	t.Helper()
	var a struct {
		Headline struct {
			Status string `json:"status"`
		} `json:"headline"`
	}
	if err := json.Unmarshal(readFile(t, path), &a); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return a.Headline.Status
}

func analyzeJSON(t *testing.T, bin, dir string) []byte {
	t.Helper()
	cmd := exec.Command(bin, "analyze", "--quiet", "--json", dir)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && (exit.ExitCode() == 3 || exit.ExitCode() == 4)) {
		t.Fatalf("audit analyze --json %s: %v", dir, err)
	}
	return out
}
