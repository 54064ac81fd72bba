package experiment

import (
	"bytes"
	"fmt"
	"math"
	"testing"
)

// The comparison table puts experiments in rows and rounds in columns, leaves "-" where an
// experiment lacks a round, and skips metrics an attack never reports.
func TestWriteComparison(t *testing.T) {
	mk := func(sigma float64, recs ...Record) *Analyzed {
		cfg := Demo()
		cfg.Train.NoiseStd = sigma
		return &Analyzed{Config: cfg, Records: recs}
	}
	exps := []*Analyzed{
		mk(1, Record{Attack: "loss", Threat: "final", Round: 1, AUC: 0.5}, Record{Attack: "loss", Threat: "final", Round: 5, AUC: 0.51}),
		mk(0.1, Record{Attack: "loss", Threat: "final", Round: 5, AUC: 0.75, Metrics: map[string]float64{"psnr": math.NaN()}}),
	}
	var buf bytes.Buffer
	label := func(c *Config) string { return fmt.Sprintf("sigma = %g", c.Train.NoiseStd) }
	if err := WriteComparison(&buf, exps, []string{"auc", "psnr"}, label); err != nil {
		t.Fatal(err)
	}
	want := `
**loss** (final threat), auc by T:

| experiment | T=1 | T=5 |
|---|---|---|
| sigma = 1 | 0.5 | 0.51 |
| sigma = 0.1 | - | 0.75 |
`
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}
