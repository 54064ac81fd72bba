package ingest

import (
	"archive/zip"
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// .npy layout: the magic "\x93NUMPY", major and minor version bytes, the header length
// (uint16 little-endian in version 1, uint32 in versions 2 and 3), then the header: a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with spaces
// and a newline, latin-1 in versions 1 and 2 and UTF-8 in version 3. The data follows.

var npyMagic = []byte("\x93NUMPY")

// npyDtype is the element types this reader converts: f4 and f8 (and f2) in either byte order.
var npyDtype = map[string]string{"f4": "F32", "f8": "F64", "f2": "F16"}

// npyInt is the integer element types ParseData converts (to int64).
var npyInt = map[string]int{"i4": 4, "i8": 8}

// ParseNPY reads one .npy array held in memory. Its Name is left empty.
func ParseNPY(data []byte) (Tensor, error) { return parseNPY(data, false, MaxElements) }

// npyLayout is what the preamble and header of an .npy file say about the data after them.
type npyLayout struct {
	h     npyHeader
	start int // the data's offset
	count int // elements
	size  int // bytes an element
	dt    string
	isInt bool // an integer array (ParseData): size is 4 or 8
	bo    binary.ByteOrder
}

// npyHeaderEnd reads the preamble at the start of data (magic, version, header length) and
// returns where the header starts and its length, checked against MaxHeader: enough to know
// how many bytes the whole header takes before reading them.
func npyHeaderEnd(data []byte) (start int, hlen uint64, err error) {
	if !bytes.HasPrefix(data, npyMagic) {
		return 0, 0, fmt.Errorf("npy: missing magic \\x93NUMPY")
	}
	if len(data) < 10 {
		return 0, 0, fmt.Errorf("npy: truncated before the header length")
	}
	major, minor := data[6], data[7]
	switch major {
	case 1:
		hlen, start = uint64(binary.LittleEndian.Uint16(data[8:10])), 10
	case 2, 3:
		if len(data) < 12 {
			return 0, 0, fmt.Errorf("npy: truncated before the header length")
		}
		hlen, start = uint64(binary.LittleEndian.Uint32(data[8:12])), 12
	default:
		return 0, 0, fmt.Errorf("npy: format version %d.%d is not supported (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if hlen > MaxHeader {
		return 0, 0, fmt.Errorf("npy: header length %d exceeds the limit %d", hlen, MaxHeader)
	}
	return start, hlen, nil
}

// readNPYLayout parses the preamble and header at the start of data (which may end right after
// the header) into the data's layout; an array of more than most elements is refused here,
// before any of its data is read or converted.
func readNPYLayout(data []byte, ints bool, most int) (npyLayout, error) {
	var l npyLayout
	start, hlen, err := npyHeaderEnd(data)
	if err != nil {
		return l, err
	}
	if hlen > uint64(len(data)-start) {
		return l, fmt.Errorf("npy: header length %d exceeds the %d bytes after it (truncated)", hlen, len(data)-start)
	}
	if l.h, err = parseNPYHeader(string(data[start : start+int(hlen)])); err != nil {
		return l, fmt.Errorf("npy: header: %w", err)
	}
	l.start = start + int(hlen)
	descr := l.h.descr
	l.bo = binary.LittleEndian
	switch descr[0] {
	case '<', '=': // '=' is native; every platform numpy writes .npy on for us is little-endian
	case '>':
		l.bo = binary.BigEndian
	case '|':
	default:
		descr = "<" + descr
	}
	if l.count = numel(l.h.shape); l.count < 0 {
		return l, fmt.Errorf("npy: shape %v has more than %d elements", l.h.shape, MaxElements)
	}
	if l.count > most {
		return l, fmt.Errorf("npy: shape %v has %d elements, more than the %d the model can take", l.h.shape, l.count, most)
	}
	size, isInt := npyInt[descr[1:]]
	l.isInt = isInt && ints
	dt, isFloat := npyDtype[descr[1:]]
	switch {
	case l.isInt:
		l.size = size
	case isFloat:
		l.size, l.dt = dtypeSize[dt], dt
	case ints:
		return l, fmt.Errorf("npy: dtype %q is not supported (want f4, f8, i4 or i8, either byte order)", l.h.descr)
	default:
		return l, fmt.Errorf("npy: dtype %q is not supported (want f4 or f8, either byte order)", l.h.descr)
	}
	return l, nil
}

func parseNPY(data []byte, ints bool, most int) (Tensor, error) {
	l, err := readNPYLayout(data, ints, most)
	if err != nil {
		return Tensor{}, err
	}
	body := data[l.start:]
	if want := l.count * l.size; len(body) != want {
		return Tensor{}, fmt.Errorf("npy: shape %v of %s needs %d data bytes, the file has %d", l.h.shape, l.h.descr, want, len(body))
	}
	if l.isInt {
		return Tensor{Shape: l.h.shape, Integer: true, Ints: cOrder(l.h, convertInts(body, l.size, l.bo))}, nil
	}
	return Tensor{Shape: l.h.shape, Data: cOrder(l.h, convert(body, l.dt, l.bo))}, nil
}

// cOrder returns an array's values in row-major order: those of a Fortran-order file reordered.
func cOrder[T any](h npyHeader, vals []T) []T {
	if h.fortran && len(h.shape) > 1 {
		return fortranToC(vals, h.shape)
	}
	return vals
}

// fortranToC reorders a column-major array into row-major order.
func fortranToC[T any](src []T, shape []int) []T {
	dst := make([]T, len(src))
	if len(src) == 0 {
		return dst
	}
	nd := len(shape)
	// Fortran strides: dimension 0 varies fastest.
	stride := make([]int, nd)
	s := 1
	for k := 0; k < nd; k++ {
		stride[k] = s
		s *= shape[k]
	}
	idx := make([]int, nd)
	off := 0
	for i := range dst {
		dst[i] = src[off]
		// Advance the C-order index (last dimension fastest), keeping the Fortran offset.
		for k := nd - 1; k >= 0; k-- {
			idx[k]++
			off += stride[k]
			if idx[k] < shape[k] {
				break
			}
			off -= stride[k] * idx[k]
			idx[k] = 0
		}
	}
	return dst
}

type npyHeader struct {
	descr   string
	fortran bool
	shape   []int
}

// parseNPYHeader parses the dict literal of a .npy header: exactly the keys descr,
// fortran_order and shape, with a string, a boolean and a tuple of non-negative integers.
func parseNPYHeader(s string) (npyHeader, error) {
	var h npyHeader
	p := &pyLexer{s: s}
	if !p.eat('{') {
		return h, fmt.Errorf("want a dict literal, got %.40q", s)
	}
	seen := map[string]bool{}
	for {
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return h, err
		}
		if seen[key] {
			return h, fmt.Errorf("key %q given twice", key)
		}
		seen[key] = true
		if !p.eat(':') {
			return h, fmt.Errorf("want ':' after %q", key)
		}
		switch key {
		case "descr":
			if h.descr, err = p.str(); err != nil {
				return h, fmt.Errorf("descr: %w", err)
			}
			if h.descr == "" {
				return h, fmt.Errorf("descr is empty")
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				h.fortran = true
			case p.word("False"):
			default:
				return h, fmt.Errorf("fortran_order: want True or False")
			}
		case "shape":
			if h.shape, err = p.tuple(); err != nil {
				return h, fmt.Errorf("shape: %w", err)
			}
		default:
			return h, fmt.Errorf("unexpected key %q (structured arrays are not supported)", key)
		}
		if !p.eat(',') {
			if !p.eat('}') {
				return h, fmt.Errorf("want ',' or '}' after %q", key)
			}
			break
		}
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, fmt.Errorf("missing key %q", k)
		}
	}
	if rest := strings.TrimSpace(p.s[p.i:]); rest != "" {
		return h, fmt.Errorf("unexpected text after the dict: %.40q", rest)
	}
	return h, nil
}

type pyLexer struct {
	s string
	i int
}

func (p *pyLexer) skip() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyLexer) eat(c byte) bool {
	p.skip()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyLexer) word(w string) bool {
	p.skip()
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

// str reads a quoted string without escapes (numpy never writes any in these keys).
func (p *pyLexer) str() (string, error) {
	p.skip()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("want a quoted string at offset %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at offset %d", p.i)
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

// tuple reads (), (n,) or (a, b, ...) of non-negative integers.
func (p *pyLexer) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, fmt.Errorf("want a tuple")
	}
	out := []int{}
	for {
		if p.eat(')') {
			return out, nil
		}
		p.skip()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		if j == p.i {
			return nil, fmt.Errorf("want a non-negative integer at offset %d", p.i)
		}
		n, err := strconv.Atoi(strings.TrimSuffix(p.s[p.i:j], "L"))
		if err != nil || n > MaxElements {
			return nil, fmt.Errorf("dimension %q out of range", p.s[p.i:j])
		}
		p.i = j
		p.word("L") // Python 2 long literals
		out = append(out, n)
		if !p.eat(',') {
			if !p.eat(')') {
				return nil, fmt.Errorf("want ',' or ')' in the tuple")
			}
			return out, nil
		}
	}
}

// WriteNPY encodes a float32 array as a version 1.0 little-endian C-order .npy file.
func WriteNPY(shape []int, data []float32) ([]byte, error) {
	if numel(shape) != len(data) {
		return nil, fmt.Errorf("npy: shape %v does not hold %d values", shape, len(data))
	}
	return writeNPY("<f4", shape, len(data), func(b []byte) []byte {
		for _, v := range data {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}), nil
}

// WriteNPYInt32 encodes an int32 array (labels) as a version 1.0 .npy file.
func WriteNPYInt32(shape []int, data []int32) ([]byte, error) {
	if numel(shape) != len(data) {
		return nil, fmt.Errorf("npy: shape %v does not hold %d values", shape, len(data))
	}
	return writeNPY("<i4", shape, len(data), func(b []byte) []byte {
		for _, v := range data {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		return b
	}), nil
}

// WriteNPZ writes tensors as an .npz archive (what numpy.savez writes: a zip of uncompressed
// version 1.0 .npy members, each named after its tensor plus ".npy"), in the order given:
// float32 tensors as <f4, integer tensors as <i8. Names may hold '/'.
func WriteNPZ(w io.Writer, tensors []Tensor) error {
	zw := zip.NewWriter(w)
	seen := map[string]bool{}
	for _, t := range tensors {
		if t.Name == "" {
			return fmt.Errorf("npz: a tensor without a name")
		}
		if seen[t.Name] {
			return fmt.Errorf("npz: tensor %q listed twice", t.Name)
		}
		seen[t.Name] = true
		if numel(t.Shape) != t.values() {
			return fmt.Errorf("npz: tensor %q: shape %v does not hold %d values", t.Name, t.Shape, t.values())
		}
		mw, err := zw.CreateHeader(&zip.FileHeader{Name: t.Name + ".npy", Method: zip.Store})
		if err != nil {
			return fmt.Errorf("npz: %v", err)
		}
		descr := "<f4"
		if t.Integer {
			descr = "<i8"
		}
		bw := bufio.NewWriterSize(mw, 1<<16)
		bw.Write(writeNPY(descr, t.Shape, 0, func(b []byte) []byte { return b }))
		writeValues(bw, t)
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("npz: tensor %q: %w", t.Name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("npz: %w", err)
	}
	return nil
}

func writeNPY(descr string, shape []int, n int, body func([]byte) []byte) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.Itoa(d)
	}
	tuple := "(" + strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	tuple += ")"
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, tuple)
	// Pad so the data starts at a multiple of 64 bytes, as numpy does; the header ends in '\n'.
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	out := append([]byte(nil), npyMagic...)
	out = append(out, 1, 0)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(h)))
	out = append(out, h...)
	return body(slices4(out, 4*n))
}

func slices4(b []byte, extra int) []byte {
	out := make([]byte, len(b), len(b)+extra)
	copy(out, b)
	return out
}

// ParseNPZ reads every array of an .npz archive (numpy.savez or savez_compressed) held in
// memory, named after its member without ".npy", in archive order.
func ParseNPZ(data []byte) ([]Tensor, error) { return parseNPZ(data, false, MaxElements, nil) }

func parseNPZ(data []byte, ints bool, most int, only []string) ([]Tensor, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("npz: %v", err)
	}
	if err := checkNPZMembers(zr.File, int64(len(data))); err != nil {
		return nil, err
	}
	var out []Tensor
	var all []string
	seen := map[string]bool{}
	total := 0 // the elements of the members read so far
	for _, f := range zr.File {
		name := strings.TrimSuffix(f.Name, ".npy")
		if name == f.Name {
			return nil, fmt.Errorf("npz: member %q is not a .npy array", f.Name)
		}
		if seen[name] {
			return nil, fmt.Errorf("npz: member %q listed twice", f.Name)
		}
		seen[name] = true
		all = append(all, name)
		if only != nil && !slices.Contains(only, name) {
			continue // not read: not decompressed either
		}
		body, err := readNPZMember(f, ints, most, total)
		if err != nil {
			return nil, fmt.Errorf("npz: member %q: %w", f.Name, err)
		}
		t, err := parseNPY(body, ints, most)
		if err != nil {
			return nil, fmt.Errorf("npz: member %q: %w", f.Name, err)
		}
		t.Name = name
		total += t.Len()
		out = append(out, t)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("npz: archive holds no arrays")
	}
	if err := missingNames(only, all); err != nil {
		return nil, fmt.Errorf("npz: %w", err)
	}
	return out, nil
}

// checkNPZMembers checks, before anything is decompressed, that the members of an archive of
// size bytes are distinct: their data lie apart within the archive, and the sizes they declare
// fit what it can hold. Entries of the central directory that name one member (or members
// whose data overlap, as in the overlapping zip bombs) would each be decompressed, a few
// kilobytes into gigabytes; Python's zipfile refuses such archives too.
func checkNPZMembers(files []*zip.File, size int64) error {
	type span struct {
		name       string
		begin, end int64
	}
	spans := make([]span, 0, len(files))
	// A deflated stream expands at most about 1032-fold, stored bytes not at all.
	room := 1100*uint64(size) + (1 << 20)
	var declared uint64
	for _, f := range files {
		// The declared size is checked before reading so a zip bomb is refused, and reading
		// stops at it whatever the stream holds.
		limit := uint64(MaxElements)*8 + MaxHeader
		if f.UncompressedSize64 > limit {
			return fmt.Errorf("npz: member %q declares %d bytes, over the limit %d", f.Name, f.UncompressedSize64, limit)
		}
		if declared += f.UncompressedSize64; declared > room {
			return fmt.Errorf("npz: the members up to %q declare %d bytes, more than the archive of %d bytes holds", f.Name, declared, size)
		}
		off, err := f.DataOffset()
		if err != nil {
			return fmt.Errorf("npz: member %q: %v", f.Name, err)
		}
		if off < 0 || off > size || f.CompressedSize64 > uint64(size-off) {
			return fmt.Errorf("npz: member %q: its %d compressed bytes at offset %d run past the end of the archive (%d bytes)", f.Name, f.CompressedSize64, off, size)
		}
		spans = append(spans, span{f.Name, off, off + int64(f.CompressedSize64)})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.begin, b.begin) })
	for i := 1; i < len(spans); i++ {
		if p, s := spans[i-1], spans[i]; s.begin < p.end || s.begin == p.begin {
			return fmt.Errorf("npz: members %q and %q share their data (bytes [%d, %d) and [%d, %d) of the archive): one member listed under two names, or a zip bomb", p.name, s.name, p.begin, p.end, s.begin, s.end)
		}
	}
	return nil
}

// readNPZMember decompresses one member. Its header is read first: a member whose header asks
// for more than most elements, or whose declared size is not its header's, is refused before
// its data is decompressed (a small deflated file can expand a thousandfold: 1 MB of zeros
// into a gigabyte). The data is then read into one buffer of the declared size.
//
// A caller's bound (ParseAtMost: a model's parameter count, every array being one of its
// tensors) holds for the archive's elements in all too; MaxElements, the bound when no caller
// gives one, bounds one array's shape only. before is the elements of the members read first.
func readNPZMember(f *zip.File, ints bool, most, before int) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	declared := f.UncompressedSize64
	// The preamble: its version says how long the header length is (10 or 12 bytes in all).
	head := make([]byte, min(declared, 12))
	if _, err := io.ReadFull(rc, head); err != nil {
		return nil, err
	}
	start, hlen, err := npyHeaderEnd(head)
	if err != nil {
		return nil, err
	}
	prefix := uint64(start) + hlen
	if prefix > declared {
		return nil, fmt.Errorf("npy: header length %d exceeds the %d bytes after it (truncated)", hlen, declared-uint64(start))
	}
	// What has been read: the preamble and header, and perhaps (a header shorter than the
	// 12 bytes read first) some data.
	have := head
	if prefix > uint64(len(head)) {
		have = make([]byte, prefix)
		copy(have, head)
		if _, err := io.ReadFull(rc, have[len(head):]); err != nil {
			return nil, err
		}
	}
	l, err := readNPYLayout(have, ints, most)
	if err != nil {
		return nil, err
	}
	if most < MaxElements && l.count > most-before {
		return nil, fmt.Errorf("npy: shape %v has %d elements and the members before it %d, more than the %d the model can take in all", l.h.shape, l.count, before, most)
	}
	if want := prefix + uint64(l.count)*uint64(l.size); want != declared {
		return nil, fmt.Errorf("npy: shape %v of %s needs %d data bytes, the member declares %d", l.h.shape, l.h.descr, want-prefix, declared-prefix)
	}
	full := make([]byte, declared)
	copy(full, have)
	if _, err := io.ReadFull(rc, full[len(have):]); err != nil {
		return nil, fmt.Errorf("holds fewer bytes than its header says (%d): %v", declared, err)
	}
	// Reading on to the end checks the member's CRC (a mismatch is zip.ErrChecksum); nothing
	// may follow its declared size.
	var extra [1]byte
	switch n, err := io.ReadFull(rc, extra[:]); {
	case n > 0:
		return nil, fmt.Errorf("holds more bytes than its header says (%d)", declared)
	case err != io.EOF:
		return nil, err
	}
	return full, nil
}
