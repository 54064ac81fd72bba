package cost

import (
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/experiment/spec"
)

// TestMemoryRefusalBeforeTheData: refused before a named dataset is loaded, the message does
// not give the parameter count of a model on one input feature (it said "d = 258 parameters"
// of a 784-64-10 MLP, which has 50,890) and calls the estimate a lower bound; with the data
// known it gives the count.
func TestMemoryRefusalBeforeTheData(t *testing.T) {
	cfg, err := spec.Parse([]byte(`
name: named
pairs: 10
data: {source: fashion-mnist, clients: 4, per_client: 20, test_samples: 10}
adjacency: {kind: replace, client: 0, index: 1, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [64], activation: tanh}
  rounds: 2
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.1
  checkpoints: [2]
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = CheckMemory(cfg, nil, 1)
	if err == nil || !strings.Contains(err.Error(), "its parameters not yet counted") || !strings.Contains(err.Error(), "needs at least") || strings.Contains(err.Error(), "d = ") {
		t.Errorf("before the data: %v", err)
	}
	cfg.Data = spec.DataConfig{Source: "synthetic", Synthetic: spec.SyntheticConfig{Dim: 784, Classes: 10}, Clients: 4, PerClient: 20, TestSamples: 10}
	if _, err = CheckMemory(cfg, nil, 1); err == nil || !strings.Contains(err.Error(), "d = 50890 parameters") {
		t.Errorf("synthetic data of 784 features: %v", err)
	}
}
