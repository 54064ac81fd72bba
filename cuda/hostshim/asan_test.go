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
	{"hidden_step", "hidden_step", func(ops *cuda.Ops) {
		// The block kernel (threads sharing memory): 2 replicas of B 3, H 4, C 2; u holds one
		// value less than the second replica's last row needs.
		const B, H, C, d = 3, 4, 2, 4*5 + 4 + 2*4 + 2
		m := func(n, rows, cols, bs int) compute.Mat {
			return compute.Mat{Buf: ops.Alloc(n), Rows: rows, Cols: cols, Stride: cols, Batch: 2, BatchStride: bs}
		}
		one := func(n, rows, cols int) compute.Mat {
			return compute.Mat{Buf: ops.Alloc(n), Rows: rows, Cols: cols, Stride: cols, Batch: 1}
		}
		p := m(2*d, 1, d, d)
		ops.HiddenStep(&compute.HiddenStepArgs{Act: compute.Tanh, Pre: m(2*B*H, B, H, B*H), Params: p, Anchor: p,
			Gram: one(B, B, 0), Prev: m(1, 0, H, 0), Labels: one(B, B, 1), GX: one(B*B, B, B), U: m(2*B*H-1, B, H, B*H),
			B1: 4 * 5, W2: 4*5 + 4, B2: 4*5 + 4 + 2*4, H: H, Cls: C, Eta: 0.1, V: 1})
		ops.Flush()
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
	build()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, c := range asanCases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestASanCatchesOutOfBounds$", "-test.count=1")
			cmd.Env = append(os.Environ(), asanChildEnv+"="+c.name, builtLibEnv+"="+buildLib)
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
