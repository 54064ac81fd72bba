package spec

import (
	"errors"
	"strings"
	"testing"
)

// An unknown field was refused in the decoder's terms ("field local_step not found in type
// train.Config"); it is named by its YAML path now, with the field it was probably meant to
// be, or the fields its section takes.
func TestUnknownFieldsNamedByPath(t *testing.T) {
	base := `
name: typo
pairs: 2
data: {source: synthetic, clients: 2, per_client: 4}
adjacency: {kind: replace, client: 0, index: 0, canary: dirac}
train:
  algorithm: fedavg
  model: {kind: mlp, hidden: [4], activation: tanh}
  rounds: 1
  local_steps: 1
  learning_rate: 0.1
  clip_norm: 1
  noise_std: 0.1
  checkpoints: [1]
`
	for _, tc := range []struct {
		from, to string
		want     []string
	}{
		{"local_steps", "local_step", []string{"line 10: train.local_step: unknown field (did you mean local_steps?)"}},
		{"per_client", "per_clients", []string{"data.per_clients: unknown field (did you mean per_client?)"}},
		{"hidden", "hiden", []string{"train.model.hiden: unknown field (did you mean hidden?)"}},
		{"pairs: 2", "pairs: 2\nflavour: 1", []string{"line 4: flavour: unknown field; the fields at the top level are name, seed, pairs, data, adjacency, train, audit"}},
		// canary.Gradient is at adjacency.gradient and at train.gradient_canary.
		{"  checkpoints: [1]", "  checkpoints: [1]\n  gradient_canary: {norm: 1, directon: 3}", []string{"adjacency.gradient.directon or train.gradient_canary.directon: unknown field (did you mean direction?)"}},
	} {
		_, err := Parse([]byte(strings.Replace(base, tc.from, tc.to, 1)))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a config error", tc.to, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", tc.to, err, w)
			}
		}
		if strings.Contains(err.Error(), "not found in type") {
			t.Errorf("%s: the Go type is named: %v", tc.to, err)
		}
	}
}
