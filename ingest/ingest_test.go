package ingest

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// ramp is the value every fixture holds at C-order position i: exact in float16 too.
func ramp(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i)*0.5 - 1
	}
	return out
}

// npyBytes builds a .npy file by hand: any version, header and body, so tests cover what our
// writer never produces (big-endian, Fortran order, versions 2 and 3).
func npyBytes(major byte, header string, body []byte) []byte {
	out := append([]byte(nil), npyMagic...)
	out = append(out, major, 0)
	if major == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(header)))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(header)))
	}
	return append(append(out, header...), body...)
}

func TestNPYVariants(t *testing.T) {
	// A 2x3 array in C order is ramp(6); in Fortran order its bytes list the columns first.
	cvals := ramp(6)
	fort := []float32{cvals[0], cvals[3], cvals[1], cvals[4], cvals[2], cvals[5]}
	le4 := func(v []float32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	be8 := func(v []float32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(float64(x)))
		}
		return b
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"v1 <f4 C", npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", le4(cvals))},
		{"v1 <f4 Fortran", npyBytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", le4(fort))},
		{"v2 >f8 C", npyBytes(2, "{'descr': '>f8', 'fortran_order': False, 'shape': (2, 3), }\n", be8(cvals))},
		{"v3 >f8 Fortran", npyBytes(3, "{\"descr\": \">f8\", \"shape\": (2,3), \"fortran_order\": True}\n", be8(fort))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseNPY(c.data)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Shape, []int{2, 3}) || !slices.Equal(got.Data, cvals) {
				t.Fatalf("got shape %v data %v, want [2 3] %v", got.Shape, got.Data, cvals)
			}
		})
	}
}

func TestNPYRoundTrip(t *testing.T) {
	for _, shape := range [][]int{{}, {0}, {5}, {2, 3}, {2, 1, 4}} {
		n := numel(shape)
		b, err := WriteNPY(shape, ramp(n))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseNPY(b)
		if err != nil {
			t.Fatalf("shape %v: %v", shape, err)
		}
		if !slices.Equal(got.Shape, shape) || !slices.Equal(got.Data, ramp(n)) {
			t.Fatalf("shape %v: got %v %v", shape, got.Shape, got.Data)
		}
	}
}

func TestSafetensorsRoundTripAndOrder(t *testing.T) {
	in := []Tensor{
		{Name: "fc2.weight", Shape: []int{2, 3}, Data: ramp(6)},
		{Name: "fc1.bias", Shape: []int{3}, Data: ramp(3)},
		{Name: "scalar", Shape: []int{}, Data: []float32{7}},
	}
	b, err := WriteSafetensors(in, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSafetensors(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("got %d tensors", len(got))
	}
	for i := range in { // file order, not name order
		if got[i].Name != in[i].Name || !slices.Equal(got[i].Shape, in[i].Shape) || !slices.Equal(got[i].Data, in[i].Data) {
			t.Fatalf("tensor %d: got %+v, want %+v", i, got[i], in[i])
		}
	}
}

func TestSafetensorsHalfPrecision(t *testing.T) {
	vals := ramp(4) // exact in both half formats
	var f16, bf16 []byte
	for _, v := range vals {
		f16 = binary.LittleEndian.AppendUint16(f16, toF16(v))
		bf16 = binary.LittleEndian.AppendUint16(bf16, uint16(math.Float32bits(v)>>16))
	}
	h := `{"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]}}`
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	b = append(append(append(b, h...), f16...), bf16...)
	got, err := ParseSafetensors(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0].Data, vals) || !slices.Equal(got[1].Data, vals) {
		t.Fatalf("got %v and %v, want %v", got[0].Data, got[1].Data, vals)
	}
}

// toF16 converts the small exact values of ramp to binary16 (normal numbers only).
func toF16(v float32) uint16 {
	if v == 0 {
		return 0
	}
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	return sign | uint16(exp)<<10 | uint16(b>>13&0x3ff)
}

func TestFloat16Specials(t *testing.T) {
	cases := map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x0001: 1.0 / (1 << 24), 0x7bff: 65504, 0x7c00: float32(math.Inf(1))}
	for h, want := range cases {
		if got := float16(h); got != want {
			t.Errorf("float16(%#x) = %v, want %v", h, got, want)
		}
	}
	if !math.IsNaN(float64(float16(0x7e00))) {
		t.Error("0x7e00 is not NaN")
	}
}

func TestErrors(t *testing.T) {
	st := func(h string, body int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		return append(append(b, h...), make([]byte, body)...)
	}
	huge := binary.LittleEndian.AppendUint64(nil, 1<<40)
	cases := []struct {
		name, want string
		parse      func() error
	}{
		{"st short", "shorter than the 8-byte", func() error { _, err := ParseSafetensors([]byte{1, 2}); return err }},
		{"st huge header", "exceeds the limit", func() error { _, err := ParseSafetensors(huge); return err }},
		{"st truncated header", "exceeds the 3 bytes", func() error {
			_, err := ParseSafetensors(append(binary.LittleEndian.AppendUint64(nil, 100), "{}x"...))
			return err
		}},
		{"st dtype", `tensor "w": dtype "I64"`, func() error {
			_, err := ParseSafetensors(st(`{"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8))
			return err
		}},
		{"st offsets", `tensor "w": data_offsets [0, 12] outside`, func() error {
			_, err := ParseSafetensors(st(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}`, 8))
			return err
		}},
		{"st shape mismatch", "needs 16", func() error {
			_, err := ParseSafetensors(st(`{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,8]}}`, 8))
			return err
		}},
		{"st overlap", "overlaps", func() error {
			_, err := ParseSafetensors(st(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12))
			return err
		}},
		{"st huge shape", "more than", func() error {
			_, err := ParseSafetensors(st(`{"w":{"dtype":"F32","shape":[1000000,1000000],"data_offsets":[0,8]}}`, 8))
			return err
		}},
		{"st unknown field", `unknown field "extra"`, func() error {
			_, err := ParseSafetensors(st(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}}`, 4))
			return err
		}},
		{"npy version", "version 9.0", func() error { _, err := ParseNPY(npyBytes(9, "", nil)); return err }},
		{"npy dtype", `dtype "<i8"`, func() error {
			_, err := ParseNPY(npyBytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", make([]byte, 8)))
			return err
		}},
		{"npy short body", "needs 12 data bytes, the file has 8", func() error {
			_, err := ParseNPY(npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", make([]byte, 8)))
			return err
		}},
		{"npy missing key", `missing key "shape"`, func() error {
			_, err := ParseNPY(npyBytes(1, "{'descr': '<f4', 'fortran_order': False}", nil))
			return err
		}},
		{"npy structured", "structured arrays", func() error {
			_, err := ParseNPY(npyBytes(1, "{'descr': '<f4', 'names': 1}", nil))
			return err
		}},
		{"npy huge header", "exceeds the limit", func() error {
			_, err := ParseNPY(append(append([]byte(nil), npyMagic...), 2, 0, 0xff, 0xff, 0xff, 0x7f))
			return err
		}},
		// The format requires the tensors to tile the data buffer: bytes after the last tensor
		// (a file rewritten in place without truncation) or between two are damage.
		{"st trailing bytes", "4 bytes follow the last tensor's data", func() error {
			_, err := ParseSafetensors(st(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 8))
			return err
		}},
		{"st gap", `no tensor holds data bytes [4, 8) before tensor "b"`, func() error {
			_, err := ParseSafetensors(st(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, 12))
			return err
		}},
		{"st gap first", `no tensor holds data bytes [0, 4) before tensor "a"`, func() error {
			_, err := ParseSafetensors(st(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8))
			return err
		}},
		// A map keeps the second of two entries of one name: the first tensor would vanish.
		{"st name twice", `header: "w" is named twice`, func() error {
			_, err := ParseSafetensors(st(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8))
			return err
		}},
		{"st at most", `tensor "w": shape [3] has 3 elements, more than the 2`, func() error {
			_, err := ParseAtMost(st(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}`, 12), "x", 2)
			return err
		}},
		// Each tensor fits the bound; together they hold more than the model can take.
		{"st at most in all", "the tensors hold 4 elements in all, more than the 3", func() error {
			_, err := ParseAtMost(st(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}`, 16), "x", 3)
			return err
		}},
		{"npy at most", "shape [3] has 3 elements, more than the 2", func() error {
			_, err := ParseAtMost(npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", make([]byte, 12)), "x", 2)
			return err
		}},
		{"npz at most in all", `member "b.npy": npy: shape [2] has 2 elements and the members before it 2, more than the 3 the model can take in all`, func() error {
			w := npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", make([]byte, 8))
			_, err := ParseAtMost(zipOf(t, map[string][]byte{"a.npy": w, "b.npy": w}), "x", 3)
			return err
		}},
		{"npz member short of its header", `member "w.npy": npy: shape [3] of <f4 needs 12 data bytes, the member declares 8`, func() error {
			_, err := ParseNPZ(zipOf(t, map[string][]byte{"w.npy": npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", make([]byte, 8))}))
			return err
		}},
		{"npz member truncated in its header", `member "w.npy": npy: header length`, func() error {
			b := npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", nil)
			_, err := ParseNPZ(zipOf(t, map[string][]byte{"w.npy": b[:20]}))
			return err
		}},
		// A header shorter than the 12 bytes read first (here empty, then 2 bytes of data):
		// the member's first bytes are preamble, header and data at once.
		{"npz empty header", `member "w.npy": npy: header: want a dict literal`, func() error {
			_, err := ParseNPZ(zipOf(t, map[string][]byte{"w.npy": []byte("\x93NUMPY\x01\x00\x00\x00xy")}))
			return err
		}},
		{"npz one-byte header", `member "w.npy": npy: header: want a dict literal`, func() error {
			_, err := ParseNPZ(zipOf(t, map[string][]byte{"w.npy": []byte("\x93NUMPY\x01\x00\x01\x00 xyzw")}))
			return err
		}},
		{"npz checksum", `member "w.npy": zip: checksum error`, func() error {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: "w.npy", Method: zip.Store})
			body := npyBytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", make([]byte, 12))
			w.Write(body)
			zw.Close()
			b := buf.Bytes()
			b[bytes.Index(b, body)+len(body)-1] ^= 1 // the last data byte, stored as it is
			_, err := ParseNPZ(b)
			return err
		}},
		{"npz not npy", `member "x.txt"`, func() error { _, err := ParseNPZ(zipOf(t, map[string][]byte{"x.txt": nil})); return err }},
		{"npz bad member", `member "w.npy": npy: missing magic`, func() error {
			_, err := ParseNPZ(zipOf(t, map[string][]byte{"w.npy": []byte("hello")}))
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.parse()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// A small deflated .npz can declare a thousandfold its size (here 32 MiB of float64 zeros in
// about 32 KiB). With a bound on the elements a tensor may have, its member is refused from its
// header, before anything is decompressed: the parse allocates next to nothing. Without the
// bound it is read into one buffer of its declared size.
func TestNPZExpansionRefusedFromItsHeader(t *testing.T) {
	const n = 4 << 20
	member := npyBytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4194304,), }", make([]byte, 8*n))
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "params.npy", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(member)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	archive := buf.Bytes()
	if len(archive) > n/16 {
		t.Fatalf("the archive is %d bytes: not a thousandfold expansion", len(archive))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = ParseAtMost(archive, "x", 16)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), `member "params.npy": npy: shape [4194304] has 4194304 elements, more than the 16`) {
		t.Fatalf("error %v, want the member refused for its elements", err)
	}
	// Opening the member allocates the decompressor's window and buffers (about 100 KiB);
	// its 32 MiB of data are never allocated.
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("refusing the member allocated %d bytes", got)
	}
	ts, err := ParseNPZ(archive)
	if err != nil || len(ts) != 1 || len(ts[0].Data) != n {
		t.Fatalf("without a bound: %d tensors, err %v", len(ts), err)
	}
}

func zipOf(t testing.TB, members map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(members[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFixtures reads the files in testdata/, written by numpy (testdata/make_fixtures.py, run
// with Debian's python3-numpy), and checks each against the values the script wrote: every
// array holds ramp in C order, whatever its dtype, byte order, memory order or format version.
func TestFixtures(t *testing.T) {
	want := map[string][]int{ // file -> shape of its arrays
		"c_f4_v1.npy": {2, 3}, "fortran_f4.npy": {3, 4}, "big_f8.npy": {2, 2, 3},
		"v2_f4.npy": {5}, "v3_f8_fortran.npy": {2, 3}, "arrays.npz": {2, 3}, "arrays_compressed.npz": {2, 3},
		"model.safetensors": {2, 3},
	}
	for file, shape := range want {
		t.Run(file, func(t *testing.T) {
			ts, err := ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			for _, tn := range ts {
				s := shape
				if tn.Name == "bias" || tn.Name == "b" {
					s = []int{shape[0]}
				}
				if !slices.Equal(tn.Shape, s) || !slices.Equal(tn.Data, ramp(numel(s))) {
					t.Errorf("%s: got shape %v data %v, want %v %v", tn.Name, tn.Shape, tn.Data, s, ramp(numel(s)))
				}
			}
		})
	}
}

func seeds(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzSafetensors(f *testing.F) {
	seeds(f, "model.safetensors")
	b, _ := WriteSafetensors([]Tensor{{Name: "w", Shape: []int{2}, Data: []float32{1, 2}}}, nil)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ParseSafetensors(data)
		if err == nil {
			for _, tn := range ts {
				if tn.Len() != len(tn.Data) {
					t.Fatalf("tensor %q: shape %v but %d values", tn.Name, tn.Shape, len(tn.Data))
				}
			}
		}
	})
}

func FuzzNPY(f *testing.F) {
	seeds(f, "c_f4_v1.npy", "fortran_f4.npy", "big_f8.npy", "v2_f4.npy", "v3_f8_fortran.npy")
	f.Fuzz(func(t *testing.T, data []byte) {
		tn, err := ParseNPY(data)
		if err == nil && tn.Len() != len(tn.Data) {
			t.Fatalf("shape %v but %d values", tn.Shape, len(tn.Data))
		}
	})
}

func FuzzNPZ(f *testing.F) {
	seeds(f, "arrays.npz", "arrays_compressed.npz")
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ParseNPZ(data)
		if err == nil && len(ts) == 0 {
			t.Fatal("no error and no arrays")
		}
	})
}

// FuzzNPZMember fuzzes the .npy member inside a well-formed archive, stored and deflated:
// fuzzing the whole archive almost never gets past the zip structure to the member reader (a
// header shorter than its first read once crashed it there).
func FuzzNPZMember(f *testing.F) {
	seeds(f, "c_f4_v1.npy", "v2_f4.npy", "v3_f8_fortran.npy")
	f.Add([]byte("\x93NUMPY\x01\x00\x00\x00xy"))
	f.Fuzz(func(t *testing.T, member []byte) {
		for _, method := range []uint16{zip.Store, zip.Deflate} {
			var buf bytes.Buffer
			zw := zip.NewWriter(&buf)
			w, err := zw.CreateHeader(&zip.FileHeader{Name: "m.npy", Method: method})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(member)
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			ts, err := ParseAtMost(buf.Bytes(), "x", 1<<16)
			if err == nil && (len(ts) != 1 || ts[0].Len() != len(ts[0].Data)) {
				t.Fatalf("no error, but %d tensors", len(ts))
			}
		}
	})
}
