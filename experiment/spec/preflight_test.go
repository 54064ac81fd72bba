package spec

import (
	"strings"
	"testing"
)

// Whole numbers: a fraction in an integer field is refused wherever it is, a float spelling of
// a whole number accepted.
func TestWholeNumbers(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"pairs: 200.5", "pairs: need a whole number, got 200.5 (line 1)"},
		{"pairs: 1e3", ""},
		{"pairs: 2.0", ""},
		{"train: {rounds: 3.7}", "train.rounds: need a whole number, got 3.7"},
		{"train: {checkpoints: [1, 2.5]}", "train.checkpoints[1]: need a whole number, got 2.5"},
		{"train: {model: {hidden: [16.5]}}", "train.model.hidden[0]: need a whole number, got 16.5"},
		{"data: {clients: .inf}", "data.clients: need a whole number, got .inf"},
		{"train: {learning_rate: 0.5}", ""},
		{"train: {algorithm: fedavg}", ""},
		{"seed: 3.5", "seed: need a whole number, got 3.5"},
	} {
		err := wholeNumbers([]byte(c.yaml))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.yaml, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
}

// Kinds whose worlds hold no canary (remove, gradient) do not build the one adjacency.canary
// names: a pattern canary on flat data used to fail the data's preparation for a sample nobody
// uses.
func TestNoCanaryBuiltWhereNoneEnters(t *testing.T) {
	for _, adj := range []string{
		"{kind: remove, client: 0, index: 1, canary: pattern}",
		"{kind: gradient, client: 0, index: 1, canary: pattern, gradient: {norm: 3}}",
	} {
		cfg, err := Parse([]byte("pairs: 1\ndata: {source: synthetic, clients: 2, per_client: 4}\ntrain: {algorithm: fedavg, model: {kind: softmax}, rounds: 1, local_steps: 1, learning_rate: 0.1}\nadjacency: " + adj + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", adj, err)
		}
		if _, err := Prepare(cfg); err != nil {
			t.Errorf("%s: %v", adj, err)
		}
	}
}
