package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/experiment/cost"
)

// `audit plan` counts a GPU's memory for the convolutions as a GPU runs them by default, by
// Winograd's F(4x4, 3x3) where it fits, and says so; where the environment it runs in sets
// FEDAUDIT_CUDA_PATCHCONV=1 it counts them in every form and takes the largest, and where it
// sets FEDAUDIT_CUDA_WINOGRAD2=1 by F(2x2, 3x3). A ResNet of width 16 keeps less by Winograd,
// and less again by F(4x4, 3x3), so the plan's figure per pair is lowest by default and higher
// with that option. Any other value leaves an option off, with a warning, and so do the
// retired FEDAUDIT_CUDA_WINOGRAD and FEDAUDIT_CUDA_WINOGRAD4.
func TestPlanCountsTheGPUsConvolutionForm(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "resnet.yaml")
	if err := os.WriteFile(cfg, []byte(`name: resnet-winograd
seed: 3
pairs: 4
data: {source: synthetic-images, clients: 3, per_client: 12, test_samples: 20}
adjacency: {kind: replace, client: 0, index: 2, canary: blank}
train:
  algorithm: fedavg
  model: {kind: resnet, stages: 2, blocks: 1, width: 16, groups: 4, input: [1, 28, 28]}
  rounds: 2
  local_steps: 1
  batching: fixed
  batch_size: 8
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.05
  checkpoints: [2]
audit:
  attacks: [loss]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`GPU memory \([^)]*\): ([0-9.]+ [KMG]iB) per pair[^\n]*`)
	plan := func() string {
		t.Helper()
		out, errOut, code := runCLI("plan", "--config", cfg, "--no-calibrate")
		if code != 0 {
			t.Fatalf("audit plan: exit %d, stderr %s", code, errOut)
		}
		m := line.FindString(out)
		if m == "" {
			t.Fatalf("no GPU memory line in:\n%s", out)
		}
		return m
	}
	t.Setenv(cuda.PatchConvEnv, "")
	wino4 := plan()
	t.Setenv(cuda.PatchConvEnv, "1")
	either := plan()
	t.Setenv(cuda.PatchConvEnv, "")
	t.Setenv(cuda.Winograd2Env, "1")
	wino := plan()
	t.Setenv(cuda.Winograd2Env, "")
	t.Logf("any form:   %s\nF(2x2, 3x3): %s\nF(4x4, 3x3): %s", either, wino, wino4)
	if strings.Contains(either, "Winograd") || !strings.Contains(wino, "by Winograd's F(2x2, 3x3); FEDAUDIT_CUDA_PATCHCONV=1 for patches") ||
		!strings.Contains(wino4, "by Winograd's F(4x4, 3x3); FEDAUDIT_CUDA_PATCHCONV=1 for patches") {
		t.Errorf("only the plans made without the patch option should name Winograd's form, each its own:\n%s\n%s\n%s", either, wino, wino4)
	}
	perPair := func(s string) float64 {
		v, err := cost.ParseBytes(line.FindStringSubmatch(s)[1])
		if err != nil {
			t.Fatal(err)
		}
		return float64(v)
	}
	if !(perPair(wino4) < perPair(wino) && perPair(wino) < perPair(either)) {
		t.Errorf("memory per pair %s (F(4x4, 3x3)), %s (F(2x2, 3x3)), %s (any form): want each below the next: an option did not reach the estimate",
			line.FindStringSubmatch(wino4)[1], line.FindStringSubmatch(wino)[1], line.FindStringSubmatch(either)[1])
	}
	// A switch set to anything but 1 is off, as the GPU reads it, and the plan says why.
	t.Setenv(cuda.PatchConvEnv, "true")
	out, errOut, code := runCLI("plan", "--config", cfg, "--no-calibrate")
	if code != 0 || line.FindString(out) != wino4 || !strings.Contains(errOut, "FEDAUDIT_CUDA_PATCHCONV=true: the option is on only with the value 1") {
		t.Errorf("with %s=true: exit %d, %q (want %q), stderr %q", cuda.PatchConvEnv, code, line.FindString(out), wino4, errOut)
	}
	t.Setenv(cuda.PatchConvEnv, "")
	for _, retired := range []string{"FEDAUDIT_CUDA_WINOGRAD", "FEDAUDIT_CUDA_WINOGRAD4"} {
		t.Setenv(retired, "1")
		out, errOut, code = runCLI("plan", "--config", cfg, "--no-calibrate")
		if code != 0 || line.FindString(out) != wino4 || !strings.Contains(errOut, retired+" is no longer read") {
			t.Errorf("with %s=1: exit %d, %q (want %q), stderr %q", retired, code, line.FindString(out), wino4, errOut)
		}
		t.Setenv(retired, "")
	}
}
