package datasets

import (
	"slices"
	"strings"
	"testing"
)

func TestBuildCanary(t *testing.T) {
	pool := indexed(50, 6, 5)
	pool.Shape = []int{1, 2, 3}
	target := pool.Sample(7)
	spec := func(kind CanaryKind, seed uint64) CanarySpec {
		return CanarySpec{Kind: kind, Shape: []int{1, 2, 3}, Classes: 5, Pool: pool, Target: target, Seed: seed}
	}
	t.Run("heldout", func(t *testing.T) {
		seen := map[float32]bool{}
		for seed := range uint64(20) {
			s, err := BuildCanary(spec(CanaryHeldOut, seed))
			if err != nil {
				t.Fatal(err)
			}
			j := int(s.Features[0])
			if !slices.Equal(s.Features, pool.Row(j)) || s.Label != pool.Labels[j] {
				t.Fatalf("seed %d: canary is not pool sample %d", seed, j)
			}
			s.Features[1] = -5
			if pool.Row(j)[1] == -5 {
				t.Fatal("canary shares storage with the pool")
			}
			seen[s.Features[0]] = true
		}
		// 20 draws from 50 samples hit at least 10 distinct ones unless the seed is ignored.
		if len(seen) < 10 {
			t.Errorf("20 seeds chose only %d distinct samples", len(seen))
		}
	})
	t.Run("relabel", func(t *testing.T) {
		labels := map[int32]bool{}
		for seed := range uint64(40) {
			s, err := BuildCanary(spec(CanaryRelabel, seed))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Features, target.Features) || s.Label == target.Label || s.Label < 0 || s.Label >= 5 {
				t.Fatalf("seed %d: relabelled to %d from %d", seed, s.Label, target.Label)
			}
			labels[s.Label] = true
		}
		if len(labels) != 4 {
			t.Errorf("40 seeds gave labels %v, want all 4 other classes", labels)
		}
	})
	t.Run("dirac", func(t *testing.T) {
		a, err := BuildCanary(spec(CanaryDirac, 3))
		if err != nil {
			t.Fatal(err)
		}
		ones := 0
		for _, x := range a.Features {
			switch x {
			case 1:
				ones++
			case 0:
			default:
				t.Fatalf("dirac feature %v", x)
			}
		}
		if len(a.Features) != 6 || ones != DefaultDiracPixels {
			t.Errorf("dirac has %d features, %d saturated", len(a.Features), ones)
		}
		b, _ := BuildCanary(spec(CanaryDirac, 3))
		if !slices.Equal(a.Features, b.Features) || a.Label != b.Label {
			t.Error("dirac not deterministic")
		}
		sp := spec(CanaryDirac, 4)
		sp.Pixels = 2
		c, _ := BuildCanary(sp)
		if n := countOnes(c.Features); n != 2 {
			t.Errorf("Pixels 2 gave %d saturated", n)
		}
	})
	t.Run("custom", func(t *testing.T) {
		s, err := BuildCanary(spec(CanaryCustom, 0))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Features, target.Features) || s.Label != target.Label {
			t.Error("custom canary differs from the target")
		}
		s.Features[0] = 99
		if target.Features[0] == 99 {
			t.Error("custom canary shares storage with the target")
		}
	})
}

func countOnes(x []float32) int {
	n := 0
	for _, v := range x {
		if v == 1 {
			n++
		}
	}
	return n
}

func TestBuildCanaryErrors(t *testing.T) {
	pool := indexed(10, 4, 3)
	cases := []struct {
		name string
		spec CanarySpec
		want string
	}{
		{"unknown", CanarySpec{Kind: "gold", Shape: []int{4}, Classes: 3}, `unknown canary kind "gold"`},
		{"no shape", CanarySpec{Kind: CanaryDirac, Classes: 3}, "empty sample shape"},
		{"no pool", CanarySpec{Kind: CanaryHeldOut, Shape: []int{4}, Classes: 3}, "no pool"},
		{"pool shape", CanarySpec{Kind: CanaryHeldOut, Shape: []int{2, 2}, Classes: 3, Pool: pool}, "pool \"indexed\" has shape [4]"},
		{"relabel one class", CanarySpec{Kind: CanaryRelabel, Shape: []int{4}, Classes: 1, Target: Sample{Features: make([]float32, 4)}}, "no other label"},
		{"relabel bad target", CanarySpec{Kind: CanaryRelabel, Shape: []int{4}, Classes: 3, Target: Sample{Features: make([]float32, 3)}}, "3 features"},
		{"dirac too many", CanarySpec{Kind: CanaryDirac, Shape: []int{4}, Classes: 3, Pixels: 5}, "5 saturated pixels, need 1 to 4"},
		{"custom bad label", CanarySpec{Kind: CanaryCustom, Shape: []int{4}, Classes: 3, Target: Sample{Features: make([]float32, 4), Label: 3}}, "label 3"},
	}
	for _, c := range cases {
		if _, err := BuildCanary(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
