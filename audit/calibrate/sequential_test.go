package calibrate

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/audit"
)

// A group-sequential audit of the Gaussian mechanism calls a true claim violated no more often
// than its joint level allows, while a mechanism at twice its claim is caught at a look well
// before the last, as often as the fixed audit of every pair catches it.
func TestSequentialSelfTest(t *testing.T) {
	row, err := SequentialSelfTest(context.Background(), SequentialOptions{Reps: 100, Pairs: 800, Batches: 8, Mu: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", row)
	if !row.Pass {
		t.Errorf("type I error: %d of %d repetitions called mu = %g violated (at most %d allowed)", row.Violations, row.Reps, row.Mu, row.MaxMisses)
	}
	if want := []int{100, 200, 400, 800}; len(row.Looks) != len(want) || row.Looks[0] != want[0] || row.Looks[3] != want[3] {
		t.Errorf("looks at %v pairs, want %v", row.Looks, want)
	}
	if row.Caught < row.FixedCaught*9/10 {
		t.Errorf("the sequential audit caught %d of %d, the fixed audit %d", row.Caught, row.Reps, row.FixedCaught)
	}
	if row.MedianStop >= 800 {
		t.Errorf("median stop at %d pairs: no earlier than the fixed audit", row.MedianStop)
	}
}

func TestSequentialLooks(t *testing.T) {
	for _, tc := range []struct {
		batches int
		want    []int
	}{{2, []int{1, 2}}, {16, []int{1, 2, 4, 8, 16}}, {10, []int{1, 2, 4, 8, 10}}} {
		got, err := audit.SequentialLooks(tc.batches)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("SequentialLooks(%d) = %v, %v; want %v", tc.batches, got, err, tc.want)
		}
	}
	if _, err := audit.SequentialLooks(1); err == nil {
		t.Error("one batch accepted")
	}
	c, err := audit.SequentialConfidences(0.95, []int{1, 2, 4, 8, 16})
	if err != nil || math.Abs(c[0]-(1-0.05/31)) > 1e-12 || math.Abs(c[4]-(1-0.05*16/31)) > 1e-12 {
		t.Errorf("SequentialConfidences(0.95, 1..16) = %v, %v", c, err)
	}
	var spent float64
	for _, x := range c {
		spent += 1 - x
	}
	if math.Abs(spent-0.05) > 1e-12 {
		t.Errorf("the looks spend %v of the error, want 0.05", spent)
	}
}
