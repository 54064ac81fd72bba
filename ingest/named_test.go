package ingest

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// A state_dict saved whole holds buffers beside the parameters (an I64 num_batches_tracked, a
// step counter), and `audit import --names` was documented to ignore the tensors it does not
// name, yet refused every such file on the dtype of the buffer. ParseNamed reads only the named
// tensors, of safetensors files and .npz archives, checking the others' spans (safetensors)
// or leaving them compressed (.npz); a named tensor the file lacks is refused naming the ones
// it has, and the unnamed parse still refuses the integer tensor.
func TestParseNamedSkipsOtherTensors(t *testing.T) {
	tensors := []Tensor{
		{Name: "fc.weight", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}},
		{Name: "step", Shape: []int{}, Integer: true, Ints: []int64{7}},
		{Name: "fc.bias", Shape: []int{2}, Data: []float32{5, 6}},
	}
	st, err := WriteSafetensors(tensors, nil)
	if err != nil {
		t.Fatal(err)
	}
	var npz bytes.Buffer
	if err := WriteNPZ(&npz, tensors); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		format string
		data   []byte
	}{{"safetensors", st}, {"npz", npz.Bytes()}} {
		got, err := ParseNamed(f.data, "snap", 6, []string{"fc.bias", "fc.weight"})
		if err != nil {
			t.Fatalf("%s: %v", f.format, err)
		}
		if len(got) != 2 {
			t.Fatalf("%s: %d tensors, want the 2 named", f.format, len(got))
		}
		for _, g := range got {
			if g.Name == "step" || g.Integer {
				t.Errorf("%s: the unnamed integer tensor was read", f.format)
			}
		}
		if _, err := ParseNamed(f.data, "snap", 6, []string{"fc.weight", "fc.scale"}); err == nil ||
			!strings.Contains(err.Error(), `no tensor "fc.scale"`) || !strings.Contains(err.Error(), `"step"`) {
			t.Errorf("%s: a missing name: %v, want it named beside the file's tensors", f.format, err)
		}
		if _, err := Parse(f.data, "snap"); err == nil {
			t.Errorf("%s: the integer tensor read without names", f.format)
		}
	}
	// An unread tensor's span must still hold its shape's bytes.
	bad := bytes.Replace(st, []byte(`"shape":[]`), []byte(`"shape":[3]`), 1)
	if bytes.Equal(bad, st) {
		t.Fatal("the test's header edit did not apply")
	}
	if _, err := ParseNamed(bad, "snap", 6, []string{"fc.bias", "fc.weight"}); err == nil || !strings.Contains(err.Error(), `tensor "step"`) {
		t.Errorf("an unread tensor whose span does not hold its shape: %v", err)
	}
}

// FuzzParseNamed fuzzes the reading of named tensors: the tensors it returns are named ones,
// each with its shape's values, and any file it reads lacks none of the names.
func FuzzParseNamed(f *testing.F) {
	seeds(f, "model.safetensors", "arrays.npz")
	b, _ := WriteSafetensors([]Tensor{{Name: "w", Shape: []int{2}, Data: []float32{1, 2}},
		{Name: "step", Shape: []int{}, Integer: true, Ints: []int64{3}}}, nil)
	f.Add(b)
	names := []string{"w", "b", "a"}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, only := range [][]string{names[:1], names} {
			ts, err := ParseNamed(data, "x", 1<<20, only)
			if err != nil {
				continue
			}
			for _, tn := range ts {
				if Detect(data) != FormatNPY && !slices.Contains(only, tn.Name) {
					t.Fatalf("tensor %q read, not among %q", tn.Name, only)
				}
				if tn.Len() != len(tn.Data) {
					t.Fatalf("tensor %q: shape %v but %d values", tn.Name, tn.Shape, len(tn.Data))
				}
			}
		}
	})
}
