package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

// failing is a Device that runs nothing, keeps its allocations, and fails launches once
// failLaunch is set and frees once failFree is set.
type failing struct {
	next                 uint64
	live                 map[uint64]bool
	failLaunch, failFree error
}

func (f *failing) Alloc(n int) (uint64, error) {
	f.next += uint64(n) + 256
	f.live[f.next] = true
	return f.next, nil
}
func (f *failing) Free(a uint64) error {
	if !f.live[a] {
		return fmt.Errorf("free of %#x, not allocated", a)
	}
	delete(f.live, a)
	return f.failFree
}
func (f *failing) Write(uint64, []byte) error { return nil }
func (f *failing) Read(dst []byte, _ uint64) error {
	clear(dst)
	return nil
}
func (f *failing) Stage([]byte) (uint64, error)                    { return 1 << 40, nil }
func (f *failing) Gemm(GemmArgs) error                             { return nil }
func (f *failing) Launch(kernels.Kernel, int, int, []uint64) error { return f.failLaunch }

// Close's contract (the Device doc): it frees everything even after an error, and returns the
// first error of the backend's life, the one Err reports, joined with what went wrong while
// releasing; so the driver device and the shim report the same for the same failure (issue 27:
// the GPU's TestParity saw GroupNorm's deliberate error at Close and the shim's did not).
func TestCloseReportsTheFirstError(t *testing.T) {
	axpby := func(o *Ops, n int) {
		x := compute.Mat{Buf: o.Alloc(n), Rows: 1, Cols: n, Stride: n, Batch: 1}
		o.Axpby(1, x, 2, x, nil)
	}

	t.Run("no error", func(t *testing.T) {
		d := &failing{live: map[uint64]bool{}}
		o := NewOps(d, Options{})
		axpby(o, 8)
		if err := o.Close(); err != nil {
			t.Errorf("Close: %v, want nil", err)
		}
		if len(d.live) != 0 {
			t.Errorf("%d allocations left", len(d.live))
		}
	})

	t.Run("error Err already reported", func(t *testing.T) {
		d := &failing{live: map[uint64]bool{}}
		o := NewOps(d, Options{})
		x := compute.Images{C: 6, N: 1, H: 2, W: 2, Batch: 1}
		x.Buf = o.Alloc(x.Size())
		g := compute.Mat{Buf: o.Alloc(6), Rows: 1, Cols: 6, Stride: 6, Batch: 1}
		o.GroupNorm(4, 1e-5, x, g, g, x)
		first := o.Err()
		if first == nil {
			t.Fatal("6 channels in 4 groups gave no error")
		}
		err := o.Close()
		if !errors.Is(err, first) {
			t.Errorf("Close: %v, want the error Err reported (%v)", err, first)
		}
		if len(d.live) != 0 {
			t.Errorf("%d allocations left after an error", len(d.live))
		}
	})

	t.Run("error raised by Close's own flush", func(t *testing.T) {
		d := &failing{live: map[uint64]bool{}}
		o := NewOps(d, Options{})
		axpby(o, 8) // queued, not issued
		d.failLaunch = errors.New("launch failed")
		err := o.Close()
		if !errors.Is(err, d.failLaunch) {
			t.Errorf("Close: %v, want the queued launch's error", err)
		}
		if !errors.Is(o.Err(), d.failLaunch) {
			t.Errorf("Err after Close: %v, want the queued launch's error", o.Err())
		}
	})

	t.Run("errors while freeing", func(t *testing.T) {
		d := &failing{live: map[uint64]bool{}}
		o := NewOps(d, Options{})
		for range 5 {
			axpby(o, 8)
		}
		if err := o.Err(); err != nil { // issues the queued launches: only the frees fail
			t.Fatal(err)
		}
		d.failFree = errors.New("context is destroyed")
		err := o.Close()
		if !errors.Is(err, d.failFree) {
			t.Fatalf("Close: %v, want the free's error", err)
		}
		// One line for the first, a count for the rest: a poisoned CUDA context fails every
		// free with the same error.
		if n := strings.Count(err.Error(), "context is destroyed"); n != 1 {
			t.Errorf("Close: %q names the free's error %d times, want once with a count", err, n)
		}
		if !strings.Contains(err.Error(), "and 4 more errors while releasing") {
			t.Errorf("Close: %q does not count the other failed frees", err)
		}
		if len(d.live) != 0 {
			t.Errorf("%d allocations left", len(d.live))
		}
	})
}
