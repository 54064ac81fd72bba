package traintest

import (
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/train/model"
)

// W3's fixture is the workload the kit times against tools/bench/w3.py: ResNet-18 of about
// 11.2 M parameters (the reference's, plus the convolutions' biases), 10 clients of 64 colour
// images, and C' differing from C in client 0's image 0 alone, with another label.
func TestW3Fixture(t *testing.T) {
	cfg := W3Config()
	d, err := model.ParamCountShape(cfg.Model, []int{3, 32, 32}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if d < 11_100_000 || d > 11_300_000 {
		t.Errorf("W3's model has %d parameters, want about 11.2 M", d)
	}
	c, cp, tgt, err := W3Data()
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 10 || len(cp) != 10 || tgt.Client != 0 || tgt.Index != 0 {
		t.Fatalf("%d and %d clients, target %+v", len(c), len(cp), tgt)
	}
	dim := 3 * 32 * 32
	for i := range c {
		if c[i].Len() != W3PerClient || !slices.Equal(c[i].Shape, []int{3, 32, 32}) {
			t.Fatalf("client %d: %d images of shape %v", i, c[i].Len(), c[i].Shape)
		}
		if i > 0 && c[i] != cp[i] {
			t.Errorf("client %d differs between the worlds", i)
		}
	}
	if c[0].Labels[0] == cp[0].Labels[0] || slices.Equal(c[0].Features[:dim], cp[0].Features[:dim]) ||
		!slices.Equal(c[0].Features[dim:], cp[0].Features[dim:]) || !slices.Equal(c[0].Labels[1:], cp[0].Labels[1:]) {
		t.Error("C' must differ from C in client 0's image 0 and its label only")
	}
	if err := cfg.Check(10, W3PerClient, 10); err != nil {
		t.Errorf("W3's configuration: %v", err)
	}
}
