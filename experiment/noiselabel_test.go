package experiment

import (
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/experiment/spec"
)

// The report names the noise the deployment actually adds: the DP-FedAvg family has no
// per-client sigma (its field is 0), so "sigma = 0" would misstate a noisy deployment.
func TestNoiseLabel(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*spec.Config)
		want string
	}{
		{"fedavg", func(c *spec.Config) { c.Train.Algorithm, c.Train.NoiseStd = algo.FedAvg, 0.05 }, "sigma = 0.05"},
		{"dp-fedavg", func(c *spec.Config) {
			c.Train.Algorithm, c.Train.NoiseMultiplier, c.Train.UpdateClip = algo.DPFedAvg, 4, 0.05
		}, "server z = 4, clip c = 0.05"},
		{"idp-fedavg", func(c *spec.Config) { c.Train.Algorithm = algo.IDPFedAvg }, "server noise per privacy plan"},
	} {
		var cfg spec.Config
		tc.cfg(&cfg)
		if got := noiseLabel(&cfg); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
