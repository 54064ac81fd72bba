package main

import (
	"os"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/experiment/spec"
)

// The plan's times cover training only, and invgrad, which reconstructs every pair's runs of
// an MLP by an optimization each, ran 18 minutes past a training of 20 s unannounced: the plan
// says how many runs it reconstructs, and whether audit.invgrad_pairs caps them.
func TestPlanCountsInvgradReconstructions(t *testing.T) {
	base, err := os.ReadFile("testdata/run_small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, audit string
		n           int
		capped      bool
	}{
		{"not planned", "attacks: [informed-all, loss]", 0, false},
		{"every pair", "attacks: [loss, invgrad]\n  invgrad_pairs: -1", 2 * 40 * 2, false},
		{"capped", "attacks: [loss, invgrad]\n  invgrad_pairs: 5", 2 * 5 * 2, true},
	} {
		text := strings.Replace(string(base), "attacks: [informed-all, loss]", tc.audit, 1)
		text = strings.Replace(text, "  informed: true", "  informed: true\n  record_upload: true", 1)
		cfg, err := spec.Parse([]byte(text))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n, capped := invgradReconstructions(cfg); n != tc.n || capped != tc.capped {
			t.Errorf("%s: %d reconstructions (capped %v), want %d (%v)", tc.name, n, capped, tc.n, tc.capped)
		}
	}
}
