package datasets

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestInclusionBits: deterministic from (seed, run), prefix-stable in k, different across runs
// and seeds, and fair: over 200 runs x 100 bits the share of ones is 1/2 within 4 standard
// errors (sd of the share 1/sqrt(4 * 20000) = 0.0035), and bits j and j+1 agree about half the time.
func TestInclusionBits(t *testing.T) {
	a := InclusionBits(7, 3, 100)
	if !slices.Equal(a, InclusionBits(7, 3, 100)) {
		t.Fatal("not deterministic")
	}
	if !slices.Equal(a[:40], InclusionBits(7, 3, 40)) {
		t.Error("bit j depends on k")
	}
	if slices.Equal(a, InclusionBits(7, 4, 100)) || slices.Equal(a, InclusionBits(8, 3, 100)) {
		t.Error("bits do not depend on the run or the seed")
	}
	ones, agree, n := 0, 0, 0
	for run := 0; run < 200; run++ {
		b := InclusionBits(11, run, 100)
		for j, x := range b {
			n++
			if x {
				ones++
			}
			if j > 0 && x == b[j-1] {
				agree++
			}
		}
	}
	if share := float64(ones) / float64(n); math.Abs(share-0.5) > 4*0.0035 {
		t.Errorf("share of included canaries %.4f, want 1/2", share)
	}
	if share := float64(agree) / float64(200*99); math.Abs(share-0.5) > 4*0.0036 {
		t.Errorf("neighbouring bits agree in %.4f, want 1/2", share)
	}
}

func canaryClients() []*Dataset {
	var out []*Dataset
	for c := 0; c < 4; c++ {
		d := indexed(10, 6, 3)
		for i := range d.Features {
			d.Features[i] += float32(100 * c)
		}
		out = append(out, d)
	}
	return out
}

func TestRecordCanaries(t *testing.T) {
	clients := canaryClients()
	spec := RecordCanarySpec{Count: 13, Kind: CanaryDirac, Pixels: 2, Reserved: []Slot{{0, 0}}, ReservedClients: []int{3}, Seed: 5}
	rc, err := NewRecordCanaries(clients, spec)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Count() != 13 {
		t.Fatalf("%d canaries", rc.Count())
	}
	seen := map[Slot]bool{}
	perClient := map[int]int{}
	for j, s := range rc.Slots {
		if seen[s] || s == (Slot{0, 0}) || s.Client == 3 {
			t.Errorf("canary %d at slot %v (taken, reserved or on a reserved client)", j, s)
		}
		seen[s] = true
		perClient[s.Client]++
		ones := 0
		for _, x := range rc.Samples[j].Features {
			if x == 1 {
				ones++
			}
		}
		if ones != 2 {
			t.Errorf("canary %d has %d saturated features, want 2", j, ones)
		}
	}
	// Round robin over the three usable clients: 5, 4, 4.
	if perClient[0] != 5 || perClient[1] != 4 || perClient[2] != 4 {
		t.Errorf("canaries per client %v, want round robin 5/4/4", perClient)
	}
	if slices.Equal(rc.Samples[0].Features, rc.Samples[1].Features) {
		t.Error("two canaries have the same features")
	}
	again, _ := NewRecordCanaries(clients, spec)
	if again.Hash() != rc.Hash() {
		t.Error("not deterministic")
	}
	spec.Seed = 6
	other, _ := NewRecordCanaries(clients, spec)
	if other.Hash() == rc.Hash() {
		t.Error("the seed changes nothing")
	}

	bits := make([]bool, 13)
	bits[0], bits[3] = true, true // canary 0 and 3 are on client 0
	before := clients[0].Clone()
	got, err := rc.Apply(clients[0], 0, bits)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(clients[0].Features, before.Features) {
		t.Fatal("Apply modified its input")
	}
	for i := 0; i < got.Len(); i++ {
		want := before.Sample(i)
		for _, j := range []int{0, 3} {
			if rc.Slots[j] == (Slot{0, i}) {
				want = rc.Samples[j]
			}
		}
		if !slices.Equal(got.Row(i), want.Features) || got.Labels[i] != want.Label {
			t.Errorf("sample %d of client 0 is not what bits %v ask for", i, bits[:4])
		}
	}
	if on := rc.OnClient(0); !slices.Equal(on, []int{0, 3, 6, 9, 12}) {
		t.Errorf("OnClient(0) = %v", on)
	}
}

func TestRecordCanariesErrors(t *testing.T) {
	clients := canaryClients()
	for _, tc := range []struct {
		spec RecordCanarySpec
		want string
	}{
		{RecordCanarySpec{Count: 0}, "need at least 1"},
		{RecordCanarySpec{Count: 41}, "only 40 free sample slots"},
		{RecordCanarySpec{Count: 31, ReservedClients: []int{0}}, "only 30 free"},
		{RecordCanarySpec{Count: 2, Kind: CanaryHeldOut}, "is not dirac or relabel"},
	} {
		if _, err := NewRecordCanaries(clients, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
	// Every slot taken: exactly as many canaries as samples works.
	rc, err := NewRecordCanaries(clients, RecordCanarySpec{Count: 40, Kind: CanaryRelabel})
	if err != nil {
		t.Fatal(err)
	}
	for j, s := range rc.Slots {
		if rc.Samples[j].Label == clients[s.Client].Labels[s.Index] {
			t.Fatalf("relabel canary %d keeps its label", j)
		}
	}
	if _, err := rc.Apply(clients[0], 0, make([]bool, 3)); err == nil {
		t.Error("Apply accepted 3 bits for 40 canaries")
	}
}
