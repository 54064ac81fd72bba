package ingest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
)

// safetensors layout: an 8-byte little-endian header length N, N bytes of JSON mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the byte
// buffer after the header), an optional "__metadata__" object of strings, then the raw
// little-endian tensor bytes.

type stEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// dtypeSize is the bytes per element of the floating-point dtypes this reader converts.
var dtypeSize = map[string]int{"F32": 4, "F64": 8, "F16": 2, "BF16": 2}

// ParseSafetensors reads every tensor of a safetensors file held in memory, ordered by data
// offset (the order the writer laid them out).
func ParseSafetensors(data []byte) ([]Tensor, error) {
	return parseSafetensors(data, false, MaxElements, nil)
}

// storedSize is the bytes per element of every dtype the safetensors format defines: a tensor
// that is not read (ParseNamed) is checked against its span with it, whatever its dtype.
var storedSize = map[string]int{"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}

// parseSafetensors converts the tensors named in only (nil: every one); the others are only
// checked to lie within the data and to tile it with the rest.
func parseSafetensors(data []byte, ints bool, most int, only []string) ([]Tensor, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("safetensors: file of %d bytes is shorter than the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n > MaxHeader {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the limit %d (not a safetensors file, or damaged)", n, MaxHeader)
	}
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the %d bytes after it (truncated or not a safetensors file)", n, len(data)-8)
	}
	header := data[8 : 8+n]
	buf := data[8+n:]
	if !bytes.HasPrefix(bytes.TrimLeft(header, " \t\r\n"), []byte("{")) {
		return nil, fmt.Errorf("safetensors: header is not a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return nil, fmt.Errorf("safetensors: header: %v", err)
	}
	if err := uniqueKeys(header); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	// Every entry is checked and the spans are checked to tile the data buffer before any
	// tensor is converted: K entries naming the same bytes would otherwise each be converted
	// into a copy of their own (a 16 MB file into gigabytes) before the overlap was seen.
	ents := make([]stChecked, 0, len(raw))
	for name, msg := range raw {
		if name == "__metadata__" {
			var meta map[string]string
			if err := json.Unmarshal(msg, &meta); err != nil {
				return nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %v", err)
			}
			continue
		}
		var e stEntry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %v", name, err)
		}
		var c stChecked
		var err error
		if only != nil && !slices.Contains(only, name) {
			c, err = e.checkSpan(name, int64(len(buf)))
		} else {
			c, err = e.check(name, int64(len(buf)), ints, most)
		}
		if err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		ents = append(ents, c)
	}
	sort.Slice(ents, func(a, b int) bool {
		if ents[a].begin != ents[b].begin {
			return ents[a].begin < ents[b].begin
		}
		return ents[a].name < ents[b].name // zero-size tensors may share an offset
	})
	// The tensors' bytes tile the data buffer, as the format requires: overlapping tensors would
	// alias each other's bytes, and bytes no tensor holds (a gap, or bytes after the last
	// tensor, the mark of a file rewritten in place without being truncated) are damage.
	var end int64
	total := 0 // elements in all: at most the data bytes once the spans are known to tile
	for _, c := range ents {
		total += c.count
		if c.end > c.begin {
			if c.begin < end {
				return nil, fmt.Errorf("safetensors: tensor %q overlaps the tensor before it", c.name)
			}
			if c.begin > end {
				return nil, fmt.Errorf("safetensors: no tensor holds data bytes [%d, %d) before tensor %q (damaged)", end, c.begin, c.name)
			}
			end = c.end
		}
	}
	if end != int64(len(buf)) {
		return nil, fmt.Errorf("safetensors: %d bytes follow the last tensor's data (damaged, or rewritten without being truncated)", int64(len(buf))-end)
	}
	// A caller's bound on the elements (a model's parameter count, ParseAtMost) holds for the
	// file as a whole: tiling keeps the total within the file's bytes, not within the model.
	// MaxElements, the bound when no caller gives one, is a guard on one tensor's shape only.
	if most < MaxElements && total > most {
		return nil, fmt.Errorf("safetensors: the tensors hold %d elements in all, more than the %d the model can take", total, most)
	}
	all := make([]string, len(ents))
	for i, c := range ents {
		all[i] = c.name
	}
	if err := missingNames(only, all); err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	out := make([]Tensor, 0, len(ents))
	for _, c := range ents {
		if !c.skip {
			out = append(out, c.convert(buf))
		}
	}
	return out, nil
}

// uniqueKeys checks that the header object names each tensor once: decoding into a map keeps
// the last of two entries of one name and drops the first without a word.
func uniqueKeys(header []byte) error {
	dec := json.NewDecoder(bytes.NewReader(header))
	if _, err := dec.Token(); err != nil { // the opening '{', checked by json.Unmarshal already
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("%q is named twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// stInt is the integer dtypes ParseData converts (to int64).
var stInt = map[string]int{"I32": 4, "I64": 8}

// stChecked is a header entry checked against the data buffer, not yet converted.
type stChecked struct {
	name       string
	shape      []int
	dtype      string
	count      int
	size       int  // bytes an element
	isInt      bool // an integer tensor (ParseData): size is 4 or 8
	begin, end int64
	skip       bool // not read (ParseNamed): its span only is checked, count is 0
}

// checkSpan checks the entry of a tensor that is not read: its offsets lie within the n data
// bytes and, where the dtype is one the format defines, hold its shape's bytes.
func (e *stEntry) checkSpan(name string, n int64) (stChecked, error) {
	c := stChecked{name: name, dtype: e.DType, skip: true}
	if len(e.Offsets) != 2 {
		return c, fmt.Errorf("data_offsets %v: want [begin, end]", e.Offsets)
	}
	c.begin, c.end = e.Offsets[0], e.Offsets[1]
	if c.begin < 0 || c.end < c.begin || c.end > n {
		return c, fmt.Errorf("data_offsets [%d, %d] outside the %d data bytes", c.begin, c.end, n)
	}
	size, ok := storedSize[e.DType]
	if !ok || e.Shape == nil {
		return c, nil
	}
	count := int64(1)
	for _, d := range e.Shape {
		if d < 0 || d > MaxElements {
			return c, fmt.Errorf("shape %v: dimension %d out of range", e.Shape, d)
		}
		if count *= d; count > MaxElements {
			return c, fmt.Errorf("shape %v has more than %d elements", e.Shape, MaxElements)
		}
	}
	if c.end-c.begin != count*int64(size) {
		return c, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, shape %v of %s needs %d", c.begin, c.end, c.end-c.begin, e.Shape, e.DType, count*int64(size))
	}
	return c, nil
}

// check validates an entry's dtype, shape and offsets against a data buffer of n bytes, without
// reading or allocating for its data.
func (e *stEntry) check(name string, n int64, ints bool, most int) (stChecked, error) {
	c := stChecked{name: name, dtype: e.DType}
	size, ok := dtypeSize[e.DType]
	isize, isInt := stInt[e.DType]
	switch {
	case isInt && ints:
		size, c.isInt = isize, true
	case !ok && ints:
		return c, fmt.Errorf("dtype %q is not supported (want F32, F64, F16, BF16, I32 or I64)", e.DType)
	case !ok:
		return c, fmt.Errorf("dtype %q is not supported (want F32, F64, F16 or BF16)", e.DType)
	}
	c.size = size
	if e.Shape == nil {
		return c, fmt.Errorf("no shape")
	}
	c.shape = make([]int, len(e.Shape))
	for i, d := range e.Shape {
		if d < 0 || d > MaxElements {
			return c, fmt.Errorf("shape %v: dimension %d out of range", e.Shape, d)
		}
		c.shape[i] = int(d)
	}
	c.count = numel(c.shape)
	if c.count < 0 {
		return c, fmt.Errorf("shape %v has more than %d elements", e.Shape, MaxElements)
	}
	if c.count > most {
		return c, fmt.Errorf("shape %v has %d elements, more than the %d the model can take", e.Shape, c.count, most)
	}
	if len(e.Offsets) != 2 {
		return c, fmt.Errorf("data_offsets %v: want [begin, end]", e.Offsets)
	}
	c.begin, c.end = e.Offsets[0], e.Offsets[1]
	if c.begin < 0 || c.end < c.begin || c.end > n {
		return c, fmt.Errorf("data_offsets [%d, %d] outside the %d data bytes", c.begin, c.end, n)
	}
	if c.end-c.begin != int64(c.count)*int64(size) {
		return c, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, shape %v of %s needs %d", c.begin, c.end, c.end-c.begin, e.Shape, e.DType, c.count*size)
	}
	return c, nil
}

// convert reads a checked entry's data out of buf.
func (c stChecked) convert(buf []byte) Tensor {
	src := buf[c.begin:c.end]
	if c.isInt {
		return Tensor{Name: c.name, Shape: c.shape, Integer: true, Ints: convertInts(src, c.size, binary.LittleEndian)}
	}
	return Tensor{Name: c.name, Shape: c.shape, Data: convert(src, c.dtype, binary.LittleEndian)}
}

// convertInts turns 4- or 8-byte signed integers into int64.
func convertInts(src []byte, size int, bo binary.ByteOrder) []int64 {
	out := make([]int64, len(src)/size)
	for i := range out {
		if size == 4 {
			out[i] = int64(int32(bo.Uint32(src[i*4:])))
		} else {
			out[i] = int64(bo.Uint64(src[i*8:]))
		}
	}
	return out
}

// convert turns count elements of a dtype into float32 (F64 rounds to nearest).
func convert(src []byte, dtype string, bo binary.ByteOrder) []float32 {
	size := dtypeSize[dtype]
	out := make([]float32, len(src)/size)
	for i := range out {
		p := src[i*size:]
		switch dtype {
		case "F32":
			out[i] = math.Float32frombits(bo.Uint32(p))
		case "F64":
			out[i] = float32(math.Float64frombits(bo.Uint64(p)))
		case "F16":
			out[i] = float16(bo.Uint16(p))
		case "BF16":
			out[i] = bfloat16(bo.Uint16(p))
		}
	}
	return out
}

// WriteSafetensors encodes tensors as a safetensors file with F32 data (I64 for integer
// tensors), in the order given.
func WriteSafetensors(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteSafetensorsTo(&buf, tensors, metadata); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteSafetensorsTo writes what WriteSafetensors returns to w, a tensor at a time.
func WriteSafetensorsTo(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	for _, t := range tensors {
		if t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: a tensor cannot be named __metadata__")
		}
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("safetensors: tensor %q listed twice", t.Name)
		}
		if n := numel(t.Shape); n != t.values() {
			return fmt.Errorf("safetensors: tensor %q: shape %v does not hold %d values", t.Name, t.Shape, t.values())
		}
		shape := slices.Clone(t.Shape)
		if shape == nil {
			shape = []int{}
		}
		dtype, size := "F32", int64(4)
		if t.Integer {
			dtype, size = "I64", 8
		}
		end := off + size*int64(t.values())
		header[t.Name] = map[string]any{"dtype": dtype, "shape": shape, "data_offsets": []int64{off, end}}
		off = end
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 { // the format pads the header with spaces so the data is aligned
		h = append(h, ' ')
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	bw.Write(n[:])
	bw.Write(h)
	for _, t := range tensors {
		writeValues(bw, t)
	}
	return bw.Flush()
}

// writeValues writes a tensor's values little-endian: float32, or int64 for an integer tensor.
// Errors stick in bw and surface at its Flush.
func writeValues(bw *bufio.Writer, t Tensor) {
	var b [8]byte
	if t.Integer {
		for _, v := range t.Ints {
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			bw.Write(b[:])
		}
		return
	}
	for _, v := range t.Data {
		binary.LittleEndian.PutUint32(b[:4], math.Float32bits(v))
		bw.Write(b[:4])
	}
}
