package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/findings"
)

// `audit check` on fedaudit's own runs passes (exit 0) and keeps its report as DIR/check.json;
// the same runs judged against a config that declares twice the noise they carry fail the noise
// scale checks (exit 3) with the failure explained; usage errors exit 2.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"train", "--quiet", "--config", filepath.Join("testdata", "check_small.yaml"), "--out", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr.String())
	}
	check := func(args ...string) (string, int) {
		t.Helper()
		stdout.Reset()
		stderr.Reset()
		code := exitCode(&stderr, run(ctx, append([]string{"check"}, args...), &stdout, &stderr))
		return stdout.String(), code
	}
	out, code := check(dir, "--json")
	if code != 0 {
		t.Fatalf("check of fedaudit's own runs: exit %d\n%s\n%s", code, out, stderr.String())
	}
	var rep findings.CheckReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Passed || rep.Family == 0 {
		t.Fatalf("check --json: %v %+v", err, rep)
	}
	raw, err := os.ReadFile(expdir.Dir(dir).Check())
	if err != nil {
		t.Fatal(err)
	}
	if kept, err := findings.UnmarshalCheck(raw); err != nil || len(kept.Checks) != len(rep.Checks) {
		t.Fatalf("check.json: %v (%d checks, printed %d)", err, len(kept.Checks), len(rep.Checks))
	}

	cfgPath := expdir.Dir(dir).Config()
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	doubled := strings.Replace(string(cfg), `"noise_std":0.3`, `"noise_std":0.6`, 1)
	if doubled == string(cfg) {
		t.Fatalf("config.json has no noise_std 0.3: %s", cfg)
	}
	if err := os.WriteFile(cfgPath, []byte(doubled), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = check(dir)
	if code != 3 || !strings.Contains(out, "noise-scale") || !strings.Contains(out, "FAILED") {
		t.Fatalf("check against twice the noise: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{}, {dir, "--pairs", "0"}, {dir, "--alpha", "1"}, {dir, dir}} {
		if _, code := check(bad...); code != 2 {
			t.Errorf("check %v: exit %d, want 2", bad, code)
		}
	}
}
