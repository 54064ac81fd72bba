package spec

import (
	"testing"
)

// TestPrepareChecksSmoothness: an audit.smoothness below the model's certified constant on the
// data is refused by Prepare, as a config error (status 2), so that run, train and plan refuse
// it before training; it was refused only by the attack stage, after the training and the
// attacks (status 1). Models without a certified constant take any given L, and a config that
// gives none is never refused.
func TestPrepareChecksSmoothness(t *testing.T) {
	const base = tinyHead +
		"adjacency: {kind: replace, client: 0, index: 1, canary: dirac}\n" +
		"train: {algorithm: fedavg, rounds: 1, local_steps: 1, learning_rate: 0.1, checkpoints: [1], model: "
	for _, c := range []struct {
		name, model, smoothness string
		refused                 bool
	}{
		{"softmax below", "{kind: softmax}", "0.5", true},
		{"softmax above", "{kind: softmax}", "1000", false},
		{"softmax none given", "{kind: softmax}", "0", false},
		{"quadratic below", "{kind: quadratic, curvature: 3}", "2", true},
		{"quadratic equal", "{kind: quadratic, curvature: 3}", "3", false},
		{"mlp any", "{kind: mlp, hidden: [4], activation: tanh}", "0.001", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(base + c.model + "}\naudit: {smoothness: " + c.smoothness + "}\n"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Prepare(cfg)
			if !c.refused {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			wantConfigError(t, err, "audit.smoothness: "+c.smoothness+" is below the certified smoothness", "leave it out")
		})
	}
}
