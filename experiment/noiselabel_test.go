package experiment

import (
	"testing"

	"github.com/fedaudit/fedaudit/algo"
)

// The report names the noise the deployment actually adds: the DP-FedAvg family has no
// per-client sigma (its field is 0), so "sigma = 0" would misstate a noisy deployment.
func TestNoiseLabel(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"fedavg", func(c *Config) { c.Train.Algorithm, c.Train.NoiseStd = algo.FedAvg, 0.05 }, "sigma = 0.05"},
		{"dp-fedavg", func(c *Config) {
			c.Train.Algorithm, c.Train.NoiseMultiplier, c.Train.UpdateClip = algo.DPFedAvg, 4, 0.05
		}, "server z = 4, clip c = 0.05"},
		{"idp-fedavg", func(c *Config) { c.Train.Algorithm = algo.IDPFedAvg }, "server noise per privacy plan"},
	} {
		var cfg Config
		tc.cfg(&cfg)
		if got := noiseLabel(&cfg); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
