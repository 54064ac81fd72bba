//go:build cgo

package hostshim

import (
	"fmt"
	"os"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
)

// One Axpby over more than 2^32 elements: 65 537 replicas of a 2 x 32 768 matrix (d = 65 536),
// with x and y broadcast (batch stride 0) so that it needs only two rows of memory. Only the
// last replica's coefficient is nonzero, so y = x exactly when the kernel maps every flat index
// beyond 2^32 to the right (replica, row, column), and anything else shows up as a wrong or
// unchanged value: a 32-bit index would wrap and never reach the last replica.
// It takes 20-40 s on the CPU, so it runs only with FEDAUDIT_SHIM_LARGE=1 (.ci/gpu-checks sets
// it); TestIndexArithmeticBeyond32Bits checks the same arithmetic in isolation every time.
func TestAxpbyBeyond32BitIndices(t *testing.T) {
	if os.Getenv("FEDAUDIT_SHIM_LARGE") != "1" {
		t.Skip("4.3 billion elements on the CPU: set FEDAUDIT_SHIM_LARGE=1 to run")
	}
	const rows, cols, batch = 2, 32768, 65537
	if total := int64(rows) * cols * batch; total <= 1<<32 {
		t.Fatalf("%d elements do not exceed 2^32", total)
	}
	d := device(t)
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	x, y := ops.Alloc(rows*cols), ops.Alloc(rows*cols)
	xs := make([]float32, rows*cols)
	for i := range xs {
		xs[i] = float32(i%1000) + 0.5
	}
	ops.Upload(x, 0, xs)
	coef := make([]float32, batch)
	coef[batch-1] = 1
	mat := func(b compute.Buffer) compute.Mat {
		return compute.Mat{Buf: b, Rows: rows, Cols: cols, Stride: cols, Batch: batch}
	}
	launches := d.Launches()
	ops.Axpby(1, mat(x), 1, mat(y), coef)
	got := make([]float32, rows*cols)
	ops.Download(got, y, 0)
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	if n := d.Launches() - launches; n != 1 {
		t.Errorf("%d launches, want 1", n)
	}
	for i := range got {
		if got[i] != xs[i] {
			t.Fatalf("y[%d] = %v, want %v (the last replica's elements, beyond 2^32, were mis-indexed)", i, got[i], xs[i])
		}
	}
}

// A GEMM over more replicas than one cuBLAS call takes (65 535) is split into calls whose
// operands start at the right replica: 65 537 replicas of a 1 x 2 by 2 x 1 product with A
// shared and B and C per replica, every result checked.
func TestGemmBatchIsSplit(t *testing.T) {
	const batch = 65537
	d := device(t)
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	a, b, c := ops.Alloc(2), ops.Alloc(2*batch), ops.Alloc(batch)
	ops.Upload(a, 0, []float32{1, 2})
	bs := make([]float32, 2*batch)
	for i := 0; i < batch; i++ {
		bs[2*i], bs[2*i+1] = float32(i%4096), float32(i/4096)
	}
	ops.Upload(b, 0, bs)
	calls := d.GemmCalls()
	ops.Gemm(false, false, 1,
		compute.Mat{Buf: a, Rows: 1, Cols: 2, Stride: 2, Batch: batch},
		compute.Mat{Buf: b, Rows: 2, Cols: 1, Stride: 1, BatchStride: 2, Batch: batch},
		0, compute.Mat{Buf: c, Rows: 1, Cols: 1, Stride: 1, BatchStride: 1, Batch: batch})
	got := make([]float32, batch)
	ops.Download(got, c, 0)
	if err := ops.Err(); err != nil {
		t.Fatal(err)
	}
	if n := d.GemmCalls() - calls; n != 2 {
		t.Errorf("%d device GEMM calls for %d replicas, want 2", n, batch)
	}
	for i, v := range got {
		if want := float32(i%4096) + 2*float32(i/4096); v != want {
			t.Fatalf("replica %d: %v, want %v", i, v, want)
		}
	}
}

// With SyncEachLaunch (or FEDAUDIT_CUDA_SYNC=1) Ops waits for the device after every launch
// and every GEMM call, and not otherwise.
func TestSyncEachLaunch(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  cuda.Options
		env  string
		sync bool
	}{
		{"off", cuda.Options{}, "", false},
		{"option", cuda.Options{SyncEachLaunch: true}, "", true},
		{"env", cuda.Options{}, "1", true},
		{"env0", cuda.Options{}, "0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cuda.SyncEnv, tc.env)
			d := device(t)
			ops := cuda.NewOps(d, tc.opt)
			defer ops.Close()
			m := compute.Mat{Buf: ops.Alloc(6), Rows: 2, Cols: 3, Stride: 3, Batch: 1}
			ops.Axpby(0, m, 0, m, nil)
			ops.Gemm(false, true, 1, m, m, 0, compute.Mat{Buf: ops.Alloc(4), Rows: 2, Cols: 2, Stride: 2, Batch: 1})
			if err := ops.Err(); err != nil {
				t.Fatal(err)
			}
			want := 0
			if tc.sync {
				want = d.Launches() + d.GemmCalls()
			}
			if d.Syncs() != want {
				t.Errorf("%d syncs after %d launches and %d GEMMs, want %d", d.Syncs(), d.Launches(), d.GemmCalls(), want)
			}
		})
	}
}

// The kernels' incremental (replica, row, column) arithmetic against division, from starting
// indices below and far beyond 2^32, with strides smaller and larger than one replica, and
// W1-like shapes (d = 50 890 as one row, or 64 x 784).
func TestIndexArithmeticBeyond32Bits(t *testing.T) {
	d := device(t)
	for _, c := range []struct{ i0, s, rows, cols, steps int64 }{
		{0, 256 * 65535, 1, 50890, 100000},
		{5, 7 * 3, 4, 5, 1000},
		{1<<32 - 3, 1, 1, 1 << 16, 100},
		{1<<32 - 12345, 256 * 65535, 64, 784, 100000},
		{123, 256 * 65535, 1, 50890, 1 << 20}, // reaches 1.76e12 > 2^40
		{1<<40 + 17, 1000, 3, 1, 10000},
		{0, 1, 1, 1, 10},
		{0, 3, 2, 2, 1000}, // stride larger than cols, smaller than one replica
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			if k := d.CheckIndex(c.i0, c.s, c.rows, c.cols, c.steps); k >= 0 {
				t.Errorf("step %d (flat index %d) has the wrong coordinates", k, c.i0+k*c.s)
			}
		})
	}
}
