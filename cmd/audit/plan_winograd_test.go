package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
)

// `audit plan` counts a GPU's memory for the convolutions as a GPU runs them by default, by
// Winograd's F(2x2, 3x3) where it fits, and says so; where the environment it runs in sets
// FEDAUDIT_CUDA_PATCHCONV=1 it counts them in both forms and takes the larger. A ResNet of
// width 16 keeps less by Winograd, so the plan's figure per pair is lower by default. Any
// other value leaves the option off, with a warning, and so does the retired
// FEDAUDIT_CUDA_WINOGRAD.
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
	wino := plan()
	t.Setenv(cuda.PatchConvEnv, "1")
	either := plan()
	t.Logf("either form: %s\nWinograd:    %s", either, wino)
	if strings.Contains(either, "Winograd") || !strings.Contains(wino, "by Winograd's F(2x2, 3x3); FEDAUDIT_CUDA_PATCHCONV=1 for patches") {
		t.Errorf("only the plan made without the option should name Winograd's form:\n%s\n%s", either, wino)
	}
	if line.FindStringSubmatch(either)[1] == line.FindStringSubmatch(wino)[1] {
		t.Errorf("the same memory per pair either way (%s): the option did not reach the estimate", line.FindStringSubmatch(wino)[1])
	}
	// A switch set to anything but 1 is off, as the GPU reads it, and the plan says why.
	t.Setenv(cuda.PatchConvEnv, "true")
	out, errOut, code := runCLI("plan", "--config", cfg, "--no-calibrate")
	if code != 0 || line.FindString(out) != wino || !strings.Contains(errOut, "FEDAUDIT_CUDA_PATCHCONV=true: the option is on only with the value 1") {
		t.Errorf("with %s=true: exit %d, %q (want %q), stderr %q", cuda.PatchConvEnv, code, line.FindString(out), wino, errOut)
	}
	t.Setenv(cuda.PatchConvEnv, "")
	t.Setenv("FEDAUDIT_CUDA_WINOGRAD", "1")
	out, errOut, code = runCLI("plan", "--config", cfg, "--no-calibrate")
	if code != 0 || line.FindString(out) != wino || !strings.Contains(errOut, "FEDAUDIT_CUDA_WINOGRAD is no longer read") {
		t.Errorf("with FEDAUDIT_CUDA_WINOGRAD=1: exit %d, %q (want %q), stderr %q", code, line.FindString(out), wino, errOut)
	}
}
