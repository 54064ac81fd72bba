package datasets

import (
	"slices"
	"strings"
	"testing"
)

func TestNewClientPair(t *testing.T) {
	clients := adjacentFixture(t)
	before := clients[2].Hash()
	canary, err := CanaryClient(clients[2], CanaryRelabel, Sample{})
	if err != nil {
		t.Fatal(err)
	}
	for i, y := range canary.Labels {
		if want := (clients[2].Labels[i] + 1) % int32(clients[2].Classes); y != want {
			t.Fatalf("relabelled sample %d has label %d, want %d", i, y, want)
		}
	}
	p, err := NewClientPair(clients, 2, 0, ReplaceClient, canary)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.CPrime) != len(clients) || p.CPrime[2].Hash() != canary.Hash() || p.CPrime[1] != clients[1] {
		t.Fatal("replace-client: C' is not C with client 2 replaced by the canary client")
	}
	if clients[2].Hash() != before {
		t.Fatal("replace-client modified C")
	}
	if !p.Kind.ClientLevel() || p.Index != 0 || p.Sample.Label != clients[2].Labels[0] || p.SamplePrime.Label != canary.Labels[0] {
		t.Fatalf("replace-client: kind %s index %d samples %v %v", p.Kind, p.Index, p.Sample.Label, p.SamplePrime.Label)
	}
	r, err := NewClientPair(clients, 2, 0, RemoveClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.CPrime) != len(clients)-1 || r.CPrime[2] != clients[3] || r.SamplePrime.Present() {
		t.Fatal("remove-client: C' is not C without client 2")
	}
	if r.Hash() == p.Hash() {
		t.Fatal("remove-client and replace-client pairs hash alike")
	}
	// The recorded sample is adjacency.index's, as the trainer's statistics are (it was
	// always the first, so the attacks that read the target sample looked at another one).
	q, err := NewClientPair(clients, 2, 1, ReplaceClient, canary)
	if err != nil {
		t.Fatal(err)
	}
	if q.Index != 1 || !slices.Equal(q.Sample.Features, clients[2].Sample(1).Features) || !slices.Equal(q.SamplePrime.Features, canary.Sample(1).Features) || q.Hash() == p.Hash() {
		t.Fatalf("replace-client at index 1: index %d, samples %v / %v", q.Index, q.Sample, q.SamplePrime)
	}
	if _, err := NewClientPair(clients, 2, clients[2].Len(), RemoveClient, nil); err == nil || !strings.Contains(err.Error(), "sample") {
		t.Fatalf("an index past the client's samples: %v", err)
	}
}

func TestNewClientPairErrors(t *testing.T) {
	clients := adjacentFixture(t)
	short := clients[0].Subset("short", []int{0, 1})
	dirac, err := CanaryClient(clients[0], CanaryDirac, Sample{Features: []float32{1, 0, 0}, Label: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		client int
		kind   AdjacencyKind
		canary *Dataset
		want   string
	}{
		{"client out of range", 4, ReplaceClient, dirac, "client 4"},
		{"no canary", 1, ReplaceClient, nil, "needs a canary"},
		{"short canary", 1, ReplaceClient, short, "samples"},
		{"remove with canary", 1, RemoveClient, dirac, "no canary"},
		{"sample kind", 1, Replace, dirac, "unknown kind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewClientPair(clients, c.client, 0, c.kind, c.canary)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := CanaryClient(clients[0], CanaryDirac, Sample{Features: []float32{1}, Label: 0}); err == nil {
		t.Fatal("a Dirac sample of the wrong size was accepted")
	}
	if dirac.Len() != clients[0].Len() || dirac.Row(3)[0] != 1 || dirac.Labels[5] != 1 {
		t.Fatal("dirac canary client is not copies of the sample")
	}
}

// TestNewClientPairRefusesOtherShape: a canary client of the client's dimension but another
// sample shape ([1 3] for [3]) would make the two worlds differ in the shape of a client as
// well as in its data; NewClientPair's contract asks for the client's shape.
func TestNewClientPairRefusesOtherShape(t *testing.T) {
	clients := adjacentFixture(t)
	canary := clients[1].Clone()
	canary.Shape = []int{1, clients[1].Dim()}
	if _, err := NewClientPair(clients, 1, 0, ReplaceClient, canary); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("canary client of shape %v for a client of shape %v: error %v, want one naming the shape", canary.Shape, clients[1].Shape, err)
	}
}
