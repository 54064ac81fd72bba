package datasets

import (
	"fmt"
	"strings"
	"testing"
)

// origins returns the original indices (first feature, see indexed) of a client's samples and
// checks that each row is an intact copy of its original.
func origins(t *testing.T, src, client *Dataset) []int {
	t.Helper()
	out := make([]int, client.Len())
	for i := range client.Len() {
		j := int(client.Row(i)[0])
		out[i] = j
		for k, x := range client.Row(i) {
			if x != src.Row(j)[k] {
				t.Fatalf("client %s sample %d is not a copy of sample %d", client.Name, i, j)
			}
		}
		if client.Labels[i] != src.Labels[j] {
			t.Fatalf("client %s sample %d has label %d, its original %d", client.Name, i, client.Labels[i], src.Labels[j])
		}
	}
	return out
}

type splitter func(d *Dataset, clients, perClient int, seed uint64) ([]*Dataset, error)

func splitters() map[string]splitter {
	return map[string]splitter{
		"iid": SplitIID,
		"dirichlet-0.1": func(d *Dataset, c, p int, s uint64) ([]*Dataset, error) {
			return SplitDirichlet(d, c, p, 0.1, s)
		},
		"dirichlet-0.001": func(d *Dataset, c, p int, s uint64) ([]*Dataset, error) {
			return SplitDirichlet(d, c, p, 0.001, s)
		},
	}
}

func TestSplitSizesDisjointDeterministic(t *testing.T) {
	src := indexed(1000, 3, 10)
	for name, split := range splitters() {
		t.Run(name, func(t *testing.T) {
			// 9 x 111 = 999 of 1000 samples: the Dirichlet split must exhaust classes and fall
			// back to what is left without reusing a sample.
			clients, err := split(src, 9, 111, 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(clients) != 9 {
				t.Fatalf("%d clients", len(clients))
			}
			used := map[int]string{}
			for c, d := range clients {
				if err := d.Validate(); err != nil {
					t.Fatal(err)
				}
				if d.Len() != 111 || d.Name != fmt.Sprintf("indexed/client%d", c) {
					t.Errorf("client %d: %d samples, name %q", c, d.Len(), d.Name)
				}
				for _, j := range origins(t, src, d) {
					if prev, dup := used[j]; dup {
						t.Fatalf("sample %d given to %s and %s", j, prev, d.Name)
					}
					used[j] = d.Name
				}
			}
			again, _ := split(src, 9, 111, 5)
			other, _ := split(src, 9, 111, 6)
			sameOther := true
			for c := range clients {
				if again[c].Hash() != clients[c].Hash() {
					t.Errorf("client %d differs between two splits with one seed", c)
				}
				sameOther = sameOther && other[c].Hash() == clients[c].Hash()
			}
			if sameOther {
				t.Error("another seed gives the same split")
			}
		})
	}
}

// TestSplitSkew measures label skew as the mean over 20 clients of the largest class share.
// Without skew (IID, or Dirichlet with large alpha) it is the expected largest of 10 class
// counts of 100 draws, about 0.155 (sd of the 20-client mean about 0.006), so 0.2 is a safe
// bound; Dirichlet(0.1) gives about 0.7 and must pass 0.6.
func TestSplitSkew(t *testing.T) {
	src := indexed(10000, 1, 10)
	topShare := func(clients []*Dataset) float64 {
		var sum float64
		for _, d := range clients {
			top := 0
			for _, c := range d.ClassCounts() {
				top = max(top, c)
			}
			sum += float64(top) / float64(d.Len())
		}
		return sum / float64(len(clients))
	}
	iid, err := SplitIID(src, 20, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := SplitDirichlet(src, 20, 100, 0.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := SplitDirichlet(src, 20, 100, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mean top-class share: IID %.3f, Dirichlet(0.1) %.3f, Dirichlet(1000) %.3f", topShare(iid), topShare(dir), topShare(flat))
	if s := topShare(iid); s > 0.2 {
		t.Errorf("IID mean top-class share %v, want near 0.1", s)
	}
	if s := topShare(dir); s < 0.6 {
		t.Errorf("Dirichlet(0.1) mean top-class share %v, want > 0.6", s)
	}
	if s := topShare(flat); s > 0.2 {
		t.Errorf("Dirichlet(1000) mean top-class share %v, want near 0.1", s)
	}
}

func TestSplitErrors(t *testing.T) {
	src := indexed(100, 2, 4)
	cases := []struct {
		name string
		err  func() error
		want string
	}{
		{"too many samples", func() error { _, err := SplitIID(src, 11, 10, 0); return err }, "need 110 samples, the dataset has 100"},
		{"no clients", func() error { _, err := SplitIID(src, 0, 10, 0); return err }, "0 clients"},
		{"no samples per client", func() error { _, err := SplitDirichlet(src, 3, 0, 1, 0); return err }, "need at least 1"},
		{"too many for Dirichlet", func() error { _, err := SplitDirichlet(src, 3, 34, 1, 0); return err }, "need 102 samples"},
		{"alpha zero", func() error { _, err := SplitDirichlet(src, 2, 2, 0, 0); return err }, "alpha 0"},
		{"invalid dataset", func() error {
			bad := src.Clone()
			bad.Labels[5] = 9
			_, err := SplitDirichlet(bad, 2, 2, 1, 0)
			return err
		}, "label 9"},
	}
	for _, c := range cases {
		if err := c.err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
