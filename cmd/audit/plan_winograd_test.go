package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
)

// `audit plan` counts a GPU's memory for the convolutions in both forms and takes the larger,
// unless the environment it runs in sets FEDAUDIT_CUDA_WINOGRAD=1: then it counts them as a GPU
// trained there will run them, by Winograd's F(2x2, 3x3), and says so. A ResNet of width 16
// keeps less by Winograd, so the plan's figure per pair falls. Any other value leaves the
// option off, with a warning.
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
	t.Setenv(cuda.WinogradEnv, "")
	either := plan()
	t.Setenv(cuda.WinogradEnv, "1")
	wino := plan()
	t.Logf("either form: %s\nWinograd:    %s", either, wino)
	if strings.Contains(either, "Winograd") || !strings.Contains(wino, "by Winograd's F(2x2, 3x3): FEDAUDIT_CUDA_WINOGRAD=1") {
		t.Errorf("only the plan made with the option should name it:\n%s\n%s", either, wino)
	}
	if line.FindStringSubmatch(either)[1] == line.FindStringSubmatch(wino)[1] {
		t.Errorf("the same memory per pair either way (%s): the option did not reach the estimate", line.FindStringSubmatch(wino)[1])
	}
	// A switch set to anything but 1 is off, as the GPU reads it, and the plan says why.
	t.Setenv(cuda.WinogradEnv, "true")
	out, errOut, code := runCLI("plan", "--config", cfg, "--no-calibrate")
	if code != 0 || line.FindString(out) != either || !strings.Contains(errOut, "FEDAUDIT_CUDA_WINOGRAD=true: the option is on only with the value 1") {
		t.Errorf("with %s=true: exit %d, %q (want %q), stderr %q", cuda.WinogradEnv, code, line.FindString(out), either, errOut)
	}
}
