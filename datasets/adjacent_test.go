package datasets

import (
	"slices"
	"strings"
	"testing"
)

func adjacentFixture(t *testing.T) []*Dataset {
	t.Helper()
	clients, err := SplitIID(indexed(40, 3, 4), 4, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	return clients
}

func TestNewAdjacentPair(t *testing.T) {
	canary := Sample{Features: []float32{-1, -2, -3}, Label: 3}
	cases := []struct {
		kind  AdjacencyKind
		index int
		// wantLen is client 2's length in C'.
		wantLen int
	}{
		{Replace, 4, 10},
		{Add, 4, 11},
		{Add, 10, 11}, // append
		{Remove, 4, 9},
		{Remove, 9, 9}, // last
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			clients := adjacentFixture(t)
			before := make([]string, len(clients))
			for i, d := range clients {
				before[i] = d.Hash()
			}
			repl := canary
			if c.kind == Remove {
				repl = Sample{}
			}
			p, err := NewAdjacentPair(clients, 2, c.index, c.kind, repl)
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range clients {
				if d.Hash() != before[i] {
					t.Errorf("client %d of C changed", i)
				}
			}
			for i := range clients {
				if i == 2 {
					if p.CPrime[i] == p.C[i] {
						t.Error("the changed client is shared, not copied")
					}
					continue
				}
				if p.CPrime[i] != p.C[i] {
					t.Errorf("unchanged client %d is not shared", i)
				}
			}
			old, changed := p.C[2], p.CPrime[2]
			if err := changed.Validate(); err != nil {
				t.Fatal(err)
			}
			if changed.Len() != c.wantLen {
				t.Fatalf("changed client has %d samples, want %d", changed.Len(), c.wantLen)
			}
			// Every sample before index is the same; after it, C' is shifted by the change.
			shift := map[AdjacencyKind]int{Replace: 0, Add: -1, Remove: 1}[c.kind]
			for i := range changed.Len() {
				if i == c.index && c.kind != Remove {
					if !slices.Equal(changed.Row(i), canary.Features) || changed.Labels[i] != canary.Label {
						t.Errorf("C' sample %d = %v/%d, want the canary", i, changed.Row(i), changed.Labels[i])
					}
					continue
				}
				j := i
				if i >= c.index {
					j = i + shift
				}
				if !slices.Equal(changed.Row(i), old.Row(j)) || changed.Labels[i] != old.Labels[j] {
					t.Errorf("C' sample %d differs from C sample %d", i, j)
				}
			}
			wantSample, wantPrime := c.kind != Add, c.kind != Remove
			if p.Sample.Present() != wantSample || p.SamplePrime.Present() != wantPrime {
				t.Errorf("sample present %v, prime present %v", p.Sample.Present(), p.SamplePrime.Present())
			}
			if wantSample && !slices.Equal(p.Sample.Features, old.Row(c.index)) {
				t.Error("Sample is not the original sample")
			}
			if wantPrime && !slices.Equal(p.SamplePrime.Features, canary.Features) {
				t.Error("SamplePrime is not the replacement")
			}
			if p.Client != 2 || p.Index != c.index || p.Kind != c.kind {
				t.Errorf("recorded client %d index %d kind %s", p.Client, p.Index, p.Kind)
			}
		})
	}
}

func TestAdjacentPairHash(t *testing.T) {
	clients := adjacentFixture(t)
	canary := Sample{Features: []float32{-1, -2, -3}, Label: 3}
	mk := func(client, index int, kind AdjacencyKind, s Sample) string {
		p, err := NewAdjacentPair(clients, client, index, kind, s)
		if err != nil {
			t.Fatal(err)
		}
		return p.Hash()
	}
	base := mk(2, 4, Replace, canary)
	if mk(2, 4, Replace, canary) != base {
		t.Error("hash not deterministic")
	}
	other := canary.Clone()
	other.Features[1] = 7
	distinct := map[string]string{base: "base"}
	for name, h := range map[string]string{
		"other client":      mk(1, 4, Replace, canary),
		"other index":       mk(2, 5, Replace, canary),
		"other replacement": mk(2, 4, Replace, other),
		"other label":       mk(2, 4, Replace, Sample{Features: canary.Features, Label: 0}),
		"add":               mk(2, 4, Add, canary),
		"remove":            mk(2, 4, Remove, Sample{}),
	} {
		if prev, dup := distinct[h]; dup {
			t.Errorf("%s has the hash of %s", name, prev)
		}
		distinct[h] = name
	}
}

func TestAdjacentPairErrors(t *testing.T) {
	clients := adjacentFixture(t)
	good := Sample{Features: []float32{1, 2, 3}, Label: 1}
	cases := []struct {
		name          string
		client, index int
		kind          AdjacencyKind
		s             Sample
		want          string
	}{
		{"client out of range", 4, 0, Replace, good, "client 4, have clients 0 to 3"},
		{"negative index", 0, -1, Replace, good, "index -1"},
		{"index past end", 0, 10, Replace, good, "index 10 of client 0, which has 10 samples"},
		{"add past end", 0, 11, Add, good, "index 11"},
		{"wrong dimension", 0, 0, Replace, Sample{Features: []float32{1}, Label: 0}, "1 features"},
		{"label out of range", 0, 0, Add, Sample{Features: []float32{1, 2, 3}, Label: 4}, "label 4"},
		{"missing replacement", 0, 0, Replace, Sample{}, "0 features"},
		{"remove with sample", 0, 0, Remove, good, "remove takes no replacement"},
		{"unknown kind", 0, 0, "swap", good, `unknown kind "swap"`},
	}
	for _, c := range cases {
		if _, err := NewAdjacentPair(clients, c.client, c.index, c.kind, c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
