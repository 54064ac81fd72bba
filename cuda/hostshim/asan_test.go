//go:build cgo

package hostshim

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
)

const asanChildEnv = "FEDAUDIT_SHIM_ASAN_CHILD"

// asanCases are deliberate out-of-bounds accesses, each of which AddressSanitizer must report
// naming its kernel: a write one element past a buffer (axpby, im2col) and a gather reading
// past the end of its input (col2im from patches one value short).
var asanCases = []struct {
	name, kernel string
	run          func(ops *cuda.Ops)
}{
	{"axpby", "axpby", func(ops *cuda.Ops) {
		y := ops.Alloc(10)
		// 11 elements into a buffer of 10.
		ops.Axpby(0, compute.Mat{}, 0, compute.Mat{Buf: y, Rows: 1, Cols: 11, Stride: 11, Batch: 1}, nil)
	}},
	{"im2col", "im2col", func(ops *cuda.Ops) {
		x := compute.Images{Buf: ops.Alloc(2 * 5 * 5), C: 2, N: 1, H: 5, W: 5, Batch: 1}
		w := compute.Window{Size: 3, Stride: 1, Pad: 1}
		// The patches are 18 x 25 values; the buffer holds one less.
		ops.Im2col(x, w, compute.Mat{Buf: ops.Alloc(18*25 - 1), Rows: 18, Cols: 25, Stride: 25, Batch: 1})
	}},
	{"col2im", "col2im", func(ops *cuda.Ops) {
		w := compute.Window{Size: 3, Stride: 1}
		dx := compute.Images{Buf: ops.Alloc(2 * 5 * 5), C: 2, N: 1, H: 5, W: 5, Batch: 1}
		// The patches are 18 x 9 values and the last pixel reads the last one (no padding);
		// the buffer holds one less.
		ops.Col2im(compute.Mat{Buf: ops.Alloc(18*9 - 1), Rows: 18, Cols: 9, Stride: 9, Batch: 1}, w, dx)
	}},
}

// Under FEDAUDIT_SHIM_ASAN=1 a kernel that reads or writes one element past its buffer is
// caught: the test runs each such launch in a child process (ASan aborts the process it finds
// the error in) and requires AddressSanitizer's heap-buffer-overflow report naming the kernel.
func TestASanCatchesOutOfBounds(t *testing.T) {
	if !ASan() {
		t.Skipf("runs only with %s=1", ASanEnv)
	}
	if name := os.Getenv(asanChildEnv); name != "" {
		for _, c := range asanCases {
			if c.name == name {
				d := device(t)
				ops := cuda.NewOps(d, cuda.Options{})
				c.run(ops)
				t.Fatalf("the out-of-bounds access of %s was not caught (err %v)", name, ops.Err())
			}
		}
		t.Fatalf("no case %q", name)
	}
	for _, c := range asanCases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestASanCatchesOutOfBounds$", "-test.count=1")
			cmd.Env = append(os.Environ(), asanChildEnv+"="+c.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the child passed:\n%s", out)
			}
			if !strings.Contains(string(out), "AddressSanitizer: heap-buffer-overflow") || !strings.Contains(string(out), c.kernel) {
				t.Fatalf("no ASan report naming %s:\n%s", c.kernel, out)
			}
		})
	}
}
