package datasets

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
)

// DefaultMaxBytes bounds the decoded data of one file read by the loaders: 1 GiB, well above
// the 47 MB of MNIST's training images and the 31 MB of a CIFAR-10 batch. A file declaring more
// is rejected before anything that size is allocated.
const DefaultMaxBytes = 1 << 30

// IDXType is the element type code of an IDX file (third byte of its magic number).
type IDXType byte

// The IDX element types.
const (
	IDXUint8   IDXType = 0x08
	IDXInt8    IDXType = 0x09
	IDXInt16   IDXType = 0x0B
	IDXInt32   IDXType = 0x0C
	IDXFloat32 IDXType = 0x0D
	IDXFloat64 IDXType = 0x0E
)

// Size is the number of bytes of one element, or 0 for an unknown type.
func (t IDXType) Size() int {
	switch t {
	case IDXUint8, IDXInt8:
		return 1
	case IDXInt16:
		return 2
	case IDXInt32, IDXFloat32:
		return 4
	case IDXFloat64:
		return 8
	}
	return 0
}

func (t IDXType) String() string {
	switch t {
	case IDXUint8:
		return "uint8"
	case IDXInt8:
		return "int8"
	case IDXInt16:
		return "int16"
	case IDXInt32:
		return "int32"
	case IDXFloat32:
		return "float32"
	case IDXFloat64:
		return "float64"
	}
	return fmt.Sprintf("unknown type 0x%02x", byte(t))
}

// maxIDXDims bounds the rank an IDX header may declare; real files have 1 to 4.
const maxIDXDims = 8

// IDX is the content of one IDX file: an n-dimensional array of one element type.
type IDX struct {
	Type IDXType
	Dims []int
	// Data holds the elements in file order, big-endian as stored.
	Data []byte
}

// ReadIDX parses an IDX file from r, raw or gzip-compressed (recognised by its magic bytes
// 0x1f 0x8b, not by a file name). maxBytes bounds the size of the data the header may declare;
// the data is read in growing chunks, so a header that lies about the size costs no more memory
// than the bytes actually present. Anything after the declared data is an error, as is a
// corrupt gzip stream.
func ReadIDX(r io.Reader, maxBytes int64) (*IDX, error) {
	r, err := maybeGunzip(r)
	if err != nil {
		return nil, err
	}
	var magic [4]byte
	if n, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, truncated("header", n, len(magic), err)
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, fmt.Errorf("bad magic % x: not an IDX file (it must start with two zero bytes)", magic[:])
	}
	t := IDXType(magic[2])
	if t.Size() == 0 {
		return nil, fmt.Errorf("bad magic % x: unknown IDX data type 0x%02x", magic[:], magic[2])
	}
	nd := int(magic[3])
	if nd < 1 || nd > maxIDXDims {
		return nil, fmt.Errorf("bad magic % x: %d dimensions, want 1 to %d", magic[:], nd, maxIDXDims)
	}
	raw := make([]byte, 4*nd)
	if n, err := io.ReadFull(r, raw); err != nil {
		return nil, truncated("header (dimension sizes)", n, len(raw), err)
	}
	dims := make([]int, nd)
	size := uint64(t.Size())
	overflow := false
	for i := range dims {
		d := binary.BigEndian.Uint32(raw[4*i:])
		dims[i] = int(d)
		hi, lo := bits.Mul64(size, uint64(d))
		overflow = overflow || hi != 0
		size = lo
	}
	if overflow || size > uint64(maxBytes) {
		return nil, fmt.Errorf("header declares dimensions %v of %s, more than the limit of %d bytes", dims, t, maxBytes)
	}
	data, err := readExactly(r, int64(size))
	if err != nil {
		return nil, err
	}
	if err := expectEOF(r); err != nil {
		return nil, err
	}
	return &IDX{Type: t, Dims: dims, Data: data}, nil
}

// maybeGunzip returns a reader of the decompressed stream when r starts with the gzip magic
// bytes, and r itself (buffered) otherwise.
func maybeGunzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip stream: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

// truncated describes a short read of a fixed-size part.
func truncated(part string, got, want int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("truncated %s: %d of %d bytes", part, got, want)
	}
	return fmt.Errorf("read %s: %w", part, err)
}

// readExactly reads n bytes, growing its buffer as data arrives rather than trusting n.
func readExactly(r io.Reader, n int64) ([]byte, error) {
	const chunk = 1 << 20
	buf := make([]byte, 0, min(n, chunk))
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, int64(2*cap(buf))))
			copy(grown, buf)
			buf = grown
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err != nil && int64(len(buf)) < n {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("truncated data: %d of %d declared bytes", len(buf), n)
			}
			return nil, fmt.Errorf("read data: %w", err)
		}
	}
	return buf, nil
}

// expectEOF checks that r holds nothing more; reading to the end also makes a gzip reader
// verify its checksum.
func expectEOF(r io.Reader) error {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return errors.New("size mismatch: data continues past the size the header declares")
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read past data: %w", err)
		}
	}
}

// readIDXFile parses the IDX file at path.
func readIDXFile(path string, maxBytes int64) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	x, err := ReadIDX(f, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

// MNISTClasses is the number of classes of MNIST, Fashion-MNIST and CIFAR-10.
const MNISTClasses = 10

// LoadIDX loads an MNIST-style pair of IDX files, raw or gzip-compressed: images of type uint8
// and dimensions (count, rows, cols), labels of type uint8 and dimension (count) with values
// below 10. Pixels are scaled to [0, 1]; a sample has shape [1 rows cols]. Errors name the file
// at fault.
func LoadIDX(imagesPath, labelsPath string) (*Dataset, error) {
	images, err := readIDXFile(imagesPath, DefaultMaxBytes)
	if err != nil {
		return nil, err
	}
	if err := checkIDXImages(images); err != nil {
		return nil, fmt.Errorf("%s: %w", imagesPath, err)
	}
	labels, err := readIDXFile(labelsPath, DefaultMaxBytes)
	if err != nil {
		return nil, err
	}
	if err := checkIDXLabels(labels, MNISTClasses); err != nil {
		return nil, fmt.Errorf("%s: %w", labelsPath, err)
	}
	d, err := FromIDX(images, labels, MNISTClasses)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", imagesPath, labelsPath, err)
	}
	d.Name = filepath.Base(imagesPath)
	return d, nil
}

// FromIDX builds a dataset from parsed MNIST-style images and labels (see LoadIDX) with the
// given number of classes.
func FromIDX(images, labels *IDX, classes int) (*Dataset, error) {
	if err := checkIDXImages(images); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	if err := checkIDXLabels(labels, classes); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	n, rows, cols := images.Dims[0], images.Dims[1], images.Dims[2]
	if n != labels.Dims[0] {
		return nil, fmt.Errorf("size mismatch: %d images but %d labels", n, labels.Dims[0])
	}
	d := &Dataset{
		Shape:    []int{1, rows, cols},
		Classes:  classes,
		Features: scaleBytes(images.Data),
		Labels:   make([]int32, n),
	}
	for i, y := range labels.Data {
		d.Labels[i] = int32(y)
	}
	return d, nil
}

func checkIDXImages(images *IDX) error {
	if images.Type != IDXUint8 {
		return fmt.Errorf("images are %s, want uint8", images.Type)
	}
	if len(images.Dims) != 3 {
		return fmt.Errorf("images have %d dimensions %v, want 3 (count, rows, cols)", len(images.Dims), images.Dims)
	}
	for _, n := range images.Dims {
		if n == 0 {
			return fmt.Errorf("images have dimensions %v: no samples", images.Dims)
		}
	}
	return nil
}

func checkIDXLabels(labels *IDX, classes int) error {
	if labels.Type != IDXUint8 {
		return fmt.Errorf("labels are %s, want uint8", labels.Type)
	}
	if len(labels.Dims) != 1 {
		return fmt.Errorf("labels have %d dimensions %v, want 1 (count)", len(labels.Dims), labels.Dims)
	}
	for i, y := range labels.Data {
		if int(y) >= classes {
			return fmt.Errorf("label %d of sample %d is outside [0, %d)", y, i, classes)
		}
	}
	return nil
}

// byteScale maps a pixel byte to [0, 1]; a table makes the scaling exact and identical
// everywhere (float32(b)/255 rounded once).
var byteScale = func() (t [256]float32) {
	for b := range t {
		t[b] = float32(b) / 255
	}
	return t
}()

func scaleBytes(b []byte) []float32 {
	out := make([]float32, len(b))
	for i, v := range b {
		out[i] = byteScale[v]
	}
	return out
}
