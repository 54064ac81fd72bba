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
		nil, {{}}, {{0.1, 0.2}, {0.3}}, {{0.1, 0}}, {{-0.1}}, {{math.NaN()}}, {{math.Inf(1)}},
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
		{"0.1,-0.2\n", "positive and finite"},
		{"0.1,NaN\n", "positive and finite"},
		{"\"0.1\n", "schedule table"},
	} {
		_, err := ReadScheduleTable(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: got %v, want an error containing %q", tc.in, err, tc.msg)
		}
	}
}

// FuzzReadScheduleTable: any input either fails cleanly or gives a rectangular table of
// positive finite rates that the bound accepts.
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
				if v := s.Eta(k, r); !(v > 0) || math.IsInf(v, 0) {
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
