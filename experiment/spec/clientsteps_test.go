package spec_test

import (
	"testing"

	"github.com/fedaudit/fedaudit/experiment/cost"
	"github.com/fedaudit/fedaudit/experiment/spec"
)

// The job-size cap counts local steps as cost.Plan does.
func TestClientStepsArePlans(t *testing.T) {
	for _, informed := range []bool{false, true} {
		cfg := spec.Demo()
		cfg.Pairs, cfg.Train.Rounds, cfg.Train.Checkpoints = 6, 3, []int{0, 1, 3}
		cfg.Train.Informed = informed
		data, err := spec.Prepare(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := cost.Plan(cfg, data, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := spec.ClientSteps(cfg); got != float64(w.ClientSteps) {
			t.Errorf("informed %v: clientSteps %v, Plan %d", informed, got, w.ClientSteps)
		}
	}
}
