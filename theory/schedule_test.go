package theory

import (
	"math"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
)

func TestNamedSchedules(t *testing.T) {
	const eta, K = 0.4, 3
	for _, tc := range []struct {
		name string
		want func(k, t int) float64
	}{
		{"constant", func(k, t int) float64 { return eta }},
		{"cyclic", func(k, t int) float64 { return eta / float64(k+1) }},
		{"stage", func(k, t int) float64 { return eta / float64(t+1) }},
		{"Stage-Wise", func(k, t int) float64 { return eta / float64(t+1) }},
		{"iterative", func(k, t int) float64 { return eta / float64(t*K+k+1) }},
	} {
		s, err := ParseSchedule(tc.name, eta, K)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for r := 0; r < 4; r++ {
			for k := 0; k < K; k++ {
				if got, want := s.Eta(k, r), tc.want(k, r); got != want {
					t.Errorf("%s: eta(%d, %d) = %v, want %v", tc.name, k, r, got, want)
				}
			}
		}
	}
	for _, bad := range []struct {
		name string
		eta  float64
		K    int
	}{{"cosine", 0.1, 3}, {"constant", 0, 3}, {"constant", -1, 3}, {"stage", math.NaN(), 3}, {"iterative", 0.1, 0}} {
		if _, err := ParseSchedule(bad.name, bad.eta, bad.K); err == nil {
			t.Errorf("ParseSchedule(%q, %v, %v) accepted", bad.name, bad.eta, bad.K)
		}
	}
}

func TestTableSchedule(t *testing.T) {
	rows := [][]float64{{0.1, 0.2}, {0.3, 0.4}, {0.5, 0.6}}
	s, err := NewTableSchedule(rows)
	if err != nil {
		t.Fatal(err)
	}
	rows[0][0] = 99 // the table is a copy
	if s.Eta(0, 0) != 0.1 || s.Eta(1, 2) != 0.6 || s.Eta(0, 1) != 0.3 {
		t.Errorf("indexing [t][k] wrong: %v %v %v", s.Eta(0, 0), s.Eta(1, 2), s.Eta(0, 1))
	}
	if r, k := s.Size(); r != 3 || k != 2 {
		t.Errorf("Size = %d, %d", r, k)
	}
	for _, out := range [][2]int{{2, 0}, {0, 3}, {-1, 0}, {0, -1}} {
		if !math.IsNaN(s.Eta(out[0], out[1])) {
			t.Errorf("Eta(%d, %d) outside the table = %v", out[0], out[1], s.Eta(out[0], out[1]))
		}
	}
	for _, bad := range [][][]float64{
		nil, {{}}, {{0.1, 0.2}, {0.3}}, {{-0.1}}, {{math.NaN()}}, {{math.Inf(1)}},
	} {
		if _, err := NewTableSchedule(bad); err == nil {
			t.Errorf("NewTableSchedule(%v) accepted", bad)
		}
	}
}

func TestReadScheduleTable(t *testing.T) {
	s, err := ReadScheduleTable(strings.NewReader("# warm-up then decay\n0.01, 0.02,0.03\n\n 0.1,0.1,0.1\n5e-2,0.05,0.05\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r, k := s.Size(); r != 3 || k != 3 {
		t.Fatalf("Size = %d, %d", r, k)
	}
	if s.Eta(2, 0) != 0.03 || s.Eta(0, 2) != 0.05 {
		t.Errorf("values: %v %v", s.Eta(2, 0), s.Eta(0, 2))
	}
	for _, tc := range []struct{ in, msg string }{
		{"", "no rounds"},
		{"0.1,abc\n", `line 1, column 2: "abc" is not a number`},
		{"0.1,0.2\n0.1\n", "round 1 has 1 steps"},
		{"0.1,-0.2\n", "finite and not negative"},
		{"0.1,NaN\n", "finite and not negative"},
		{"\"0.1\n", "schedule table"},
	} {
		_, err := ReadScheduleTable(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: got %v, want an error containing %q", tc.in, err, tc.msg)
		}
	}
}

// FuzzReadScheduleTable: any input either fails cleanly or gives a rectangular table of
// finite rates, none negative, that the bound accepts.
func FuzzReadScheduleTable(f *testing.F) {
	for _, seed := range []string{"0.1,0.2\n0.3,0.4\n", "# c\n1e-3\n", "0.1,\"0.2\"\n", "", "\"", "0x1p-3,1\n", "inf\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ReadScheduleTable(strings.NewReader(in))
		if err != nil {
			return
		}
		rounds, steps := s.Size()
		if rounds < 1 || steps < 1 {
			t.Fatalf("empty table accepted: %d x %d", rounds, steps)
		}
		for r := 0; r < rounds; r++ {
			for k := 0; k < steps; k++ {
				if v := s.Eta(k, r); !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("rate %v at (%d, %d)", v, k, r)
				}
			}
		}
		cfg := Config{Algo: algo.FedAvg, Schedule: s, L: 1, K: steps, M: 2, Sigma: 1, Clip: 1}
		if _, err := Bounds(cfg, []int{rounds}); err != nil {
			t.Fatalf("valid table rejected by Bounds: %v", err)
		}
	})
}

// TestZeroRateSteps: a step of rate 0 (a warm-up from 0, a frozen round; train accepts them)
// moves nothing, so the bounds of a table with such steps are those of the table without them,
// K one smaller, for each algorithm; the theory refused them, and with them the bounds of a
// training it had accepted.
func TestZeroRateSteps(t *testing.T) {
	with, err := NewTableSchedule([][]float64{{0, 0.1, 0.05}, {0.1, 0, 0.05}, {0, 0, 0}, {0.02, 0.02, 0}})
	if err != nil {
		t.Fatal(err)
	}
	without, err := NewTableSchedule([][]float64{{0.1, 0.05}, {0.1, 0.05}, {0, 0}, {0.02, 0.02}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []algo.Algorithm{algo.FedAvg, algo.FedProx, algo.DPSGD} {
		cfg := Config{Algo: a, L: 1.5, M: 4, N: 2, Sigma: 0.7, Clip: 1, Alpha: 3}
		if a == algo.DPSGD {
			cfg.M, cfg.N, cfg.Batch = 1, 0, 8
		}
		c3, c2 := cfg, cfg
		c3.Schedule, c3.K = with, 3
		c2.Schedule, c2.K = without, 2
		b3, err := Bounds(c3, []int{1, 2, 3, 4})
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		b2, err := Bounds(c2, []int{1, 2, 3, 4})
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		for i := range b3 {
			if d := math.Abs(b3[i].Mu - b2[i].Mu); d > 1e-12*b2[i].Mu || math.IsNaN(b3[i].Mu) {
				t.Errorf("%s T = %d: mu %v with the zero steps, %v without", a, b3[i].T, b3[i].Mu, b2[i].Mu)
			}
		}
	}
	// A table of more steps than K was read to its first K steps: refused now.
	cfg := Config{Algo: algo.FedAvg, Schedule: with, K: 2, L: 1, M: 4, Sigma: 1, Clip: 1}
	if _, err := Bounds(cfg, []int{1}); err == nil || !strings.Contains(err.Error(), "table has 3 steps per round, K is 2") {
		t.Errorf("a table of 3 steps with K = 2: %v", err)
	}
}
