package ingest

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
)

// dataTensors is a mixed set as `audit datasets export` writes: float features (NaN payloads and
// signed zeros included, to check bits survive), int64 labels and scalars, empty tensors.
func dataTensors() []Tensor {
	x := ramp(6)
	x[1] = float32(math.Copysign(0, -1))
	x[4] = math.Float32frombits(0x7fc01234)
	return []Tensor{
		{Name: "c/client0/x", Shape: []int{2, 3}, Data: x},
		{Name: "c/client0/y", Shape: []int{2}, Integer: true, Ints: []int64{9, -1}},
		{Name: "c/client1/x", Shape: []int{0, 3}, Data: []float32{}},
		{Name: "c/client1/y", Shape: []int{0}, Integer: true, Ints: []int64{}},
		{Name: "canary/index", Shape: []int{}, Integer: true, Ints: []int64{1 << 40}},
	}
}

func sameTensors(t *testing.T, got, want []Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d tensors, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		bits := func(v []float32) []uint32 {
			out := make([]uint32, len(v))
			for j, f := range v {
				out[j] = math.Float32bits(f)
			}
			return out
		}
		if g.Name != w.Name || !slices.Equal(g.Shape, w.Shape) || g.Integer != w.Integer ||
			!slices.Equal(g.Ints, w.Ints) || !slices.Equal(bits(g.Data), bits(w.Data)) {
			t.Fatalf("tensor %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestDataRoundTrip(t *testing.T) {
	in := dataTensors()
	var npz bytes.Buffer
	if err := WriteNPZ(&npz, in); err != nil {
		t.Fatal(err)
	}
	st, err := WriteSafetensors(in, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"npz": npz.Bytes(), "safetensors": st} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseData(b, "")
			if err != nil {
				t.Fatal(err)
			}
			// safetensors orders by offset and name: the empty client1 tensors share an offset
			// with what follows, so compare by name.
			if name == "safetensors" {
				byName := map[string]Tensor{}
				for _, g := range got {
					byName[g.Name] = g
				}
				got = got[:0]
				for _, w := range in {
					got = append(got, byName[w.Name])
				}
			}
			sameTensors(t, got, in)
			// The snapshot readers refuse integer tensors: a snapshot holds parameters.
			if _, err := Parse(b, ""); err == nil || !strings.Contains(err.Error(), "not supported") {
				t.Fatalf("Parse of integer tensors: %v, want a refusal", err)
			}
		})
	}
}

func TestDataNPYIntVariants(t *testing.T) {
	// A 2x3 int array: <i4 in C order, >i8 in Fortran order.
	vals := []int64{0, -1, 2, 1 << 31 / 2, -5, 7}
	var le4, be8 []byte
	for _, v := range vals {
		le4 = binary.LittleEndian.AppendUint32(le4, uint32(int32(v)))
	}
	for _, j := range []int{0, 3, 1, 4, 2, 5} {
		be8 = binary.BigEndian.AppendUint64(be8, uint64(vals[j]))
	}
	for name, b := range map[string][]byte{
		"<i4 C":       npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n", le4),
		">i8 Fortran": npyBytes(1, "{'descr': '>i8', 'fortran_order': True, 'shape': (2, 3), }\n", be8),
	} {
		got, err := parseNPY(b, true, MaxElements)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !got.Integer || !slices.Equal(got.Shape, []int{2, 3}) || !slices.Equal(got.Ints, vals) {
			t.Fatalf("%s: got %+v", name, got)
		}
		if _, err := ParseNPY(b); err == nil {
			t.Fatalf("%s: ParseNPY accepts an integer array", name)
		}
	}
	bad := npyBytes(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n", le4[:20])
	if _, err := parseNPY(bad, true, MaxElements); err == nil || !strings.Contains(err.Error(), "needs 24 data bytes") {
		t.Fatalf("truncated <i4: %v", err)
	}
	if _, err := parseNPY(npyBytes(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }\n", []byte{1, 0}), true, MaxElements); err == nil ||
		!strings.Contains(err.Error(), "want f4, f8, i4 or i8") {
		t.Fatalf("<u2: %v", err)
	}
}

func TestDataWriterErrors(t *testing.T) {
	for _, c := range []struct {
		ts   []Tensor
		want string
	}{
		{[]Tensor{{Name: "a", Shape: []int{2}, Integer: true, Ints: []int64{1}}}, "does not hold 1 values"},
		{[]Tensor{{Name: "a", Shape: []int{1}, Data: []float32{1}}, {Name: "a", Shape: []int{1}, Data: []float32{1}}}, "listed twice"},
		{[]Tensor{{Shape: []int{1}, Data: []float32{1}}}, "without a name"},
	} {
		if err := WriteNPZ(&bytes.Buffer{}, c.ts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteNPZ(%+v): %v, want %q", c.ts, err, c.want)
		}
	}
	if _, err := WriteSafetensors([]Tensor{{Name: "a", Shape: []int{2}, Integer: true, Ints: []int64{1}}}, nil); err == nil {
		t.Error("WriteSafetensors accepts a short integer tensor")
	}
}

func FuzzData(f *testing.F) {
	var npz bytes.Buffer
	WriteNPZ(&npz, dataTensors())
	f.Add(npz.Bytes())
	st, _ := WriteSafetensors(dataTensors(), nil)
	f.Add(st)
	// A lone .npy of integers, and the same as a big-endian Fortran-order array.
	npy, _ := WriteNPYInt32([]int{2, 3}, []int32{1, -2, 3, 1 << 30, 0, -1})
	f.Add(npy)
	f.Add(bytes.Replace(bytes.Replace(npy, []byte("'<i4'"), []byte("'>i4'"), 1), []byte("False"), []byte("True "), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ParseData(data, "x")
		if err != nil {
			return
		}
		for _, tn := range ts {
			if tn.Len() != tn.values() || (tn.Integer && tn.Data != nil) {
				t.Fatalf("tensor %q: shape %v, integer %v, %d values", tn.Name, tn.Shape, tn.Integer, tn.values())
			}
		}
	})
}
