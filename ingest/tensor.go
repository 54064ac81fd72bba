package ingest

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Tensor is one named array converted to float32, in C (row-major) order.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
	// Integer marks an integer tensor (labels, indices): its values are in Ints and Data is
	// nil. Only ParseData and ReadDataFile return integer tensors (the snapshot readers Parse,
	// ReadFile, ParseNPY, ParseNPZ and ParseSafetensors refuse integer dtypes: a snapshot holds
	// model parameters), and the writers write them as int64 (<i8, I64).
	Integer bool
	Ints    []int64
}

// Len is the number of elements the shape declares.
func (t Tensor) Len() int { return numel(t.Shape) }

// values is the number of values the tensor holds (Ints or Data).
func (t Tensor) values() int {
	if t.Integer {
		return len(t.Ints)
	}
	return len(t.Data)
}

// MaxHeader is the largest header (safetensors JSON, .npy dictionary) a reader accepts. Real
// headers are a few kilobytes; a larger claim is damage or an attack, refused before allocating.
const MaxHeader = 16 << 20

// MaxElements is the largest tensor a reader accepts (4 GiB of float32): a guard against shapes
// whose product overflows or that no model of this tool has.
const MaxElements = 1 << 30

// numel multiplies dims; it returns -1 when a dim is negative or the product exceeds MaxElements.
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d != 0 && n > MaxElements/d {
			return -1
		}
		n *= d
	}
	return n
}

// Format names the formats ReadFile tells apart.
type Format string

const (
	FormatSafetensors Format = "safetensors"
	FormatNPY         Format = "npy"
	FormatNPZ         Format = "npz"
)

// Detect tells the format of a file by content: the .npy magic, the zip magic of .npz, else
// safetensors (which has no magic; its reader validates the header instead).
func Detect(data []byte) Format {
	switch {
	case bytes.HasPrefix(data, npyMagic):
		return FormatNPY
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return FormatNPZ
	}
	return FormatSafetensors
}

// ReadFile reads every tensor of a snapshot file, in the order the file lists them (safetensors:
// by data offset; .npz: archive order). A .npy file holds one tensor, named after the file
// without its extension.
func ReadFile(path string) ([]Tensor, error) { return readFile(path, false) }

func readFile(path string, ints bool) ([]Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ts, err := parse(data, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), ints, MaxElements, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ts, nil
}

// Parse reads the tensors of a snapshot held in memory; name names a lone .npy array.
func Parse(data []byte, name string) ([]Tensor, error) {
	return parse(data, name, false, MaxElements, nil)
}

// ParseAtMost is Parse refusing any tensor of more than most elements before its data is
// converted (or, in an .npz archive, decompressed): a reader that knows how large a tensor can
// be (a model's parameter count) keeps a hostile or mistaken file from taking the memory of its
// declared shapes.
func ParseAtMost(data []byte, name string, most int) ([]Tensor, error) {
	return parse(data, name, false, min(most, MaxElements), nil)
}

// ParseNamed is ParseAtMost reading only the tensors of a safetensors file or .npz archive
// named in names, and refusing a file that lacks one of them (naming those it has): a
// state_dict holds buffers of other dtypes (an I64 num_batches_tracked, a step counter) beside
// the parameters, and those are checked only to lie within the file (safetensors), or not
// decompressed (.npz). A lone .npy array is read whatever its name.
func ParseNamed(data []byte, name string, most int, names []string) ([]Tensor, error) {
	return parse(data, name, false, min(most, MaxElements), names)
}

// missingNames is an error naming the first of names (nil: none asked for) that all lacks,
// and all.
func missingNames(names, all []string) error {
	for _, n := range names {
		if !slices.Contains(all, n) {
			return fmt.Errorf("no tensor %q (the file has %s)", n, strings.Join(quoted(all), ", "))
		}
	}
	return nil
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

// ParseData reads every tensor of a data file held in memory (one `audit datasets export`
// writes: features and labels) as Parse does, and also integer tensors (.npy <i4, <i8 and
// their big-endian forms; safetensors I32, I64), returned with Integer set and their values in
// Ints.
func ParseData(data []byte, name string) ([]Tensor, error) {
	return parse(data, name, true, MaxElements, nil)
}

// ReadDataFile is ReadFile through ParseData.
func ReadDataFile(path string) ([]Tensor, error) { return readFile(path, true) }

func parse(data []byte, name string, ints bool, most int, only []string) ([]Tensor, error) {
	switch Detect(data) {
	case FormatNPY:
		t, err := parseNPY(data, ints, most)
		if err != nil {
			return nil, err
		}
		t.Name = name
		return []Tensor{t}, nil
	case FormatNPZ:
		return parseNPZ(data, ints, most, only)
	}
	return parseSafetensors(data, ints, most, only)
}

// float16 converts IEEE binary16 bits to float32 (subnormals, infinities and NaN included).
func float16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac * 2^-24
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}

// bfloat16 converts bfloat16 bits (the top half of a float32) to float32.
func bfloat16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
