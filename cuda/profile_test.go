package cuda

import (
	"errors"
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
)

// clockDevice is a device that runs nothing on a virtual clock: a kernel launch takes
// launchCost (per kernel), a GEMM gemmCost, a write or staged upload copyCost, so the time each
// operation should be charged is known exactly. Its marks read the clock when recorded.
type clockDevice struct {
	failing
	now                           float64
	launchCost                    map[kernels.Kernel]float64
	gemmCost, copyCost            float64
	made, released, live, waitErr int
}

func (c *clockDevice) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	c.now += c.launchCost[k]
	return nil
}
func (c *clockDevice) Gemm(GemmArgs) error { c.now += c.gemmCost; return nil }
func (c *clockDevice) Write(uint64, []byte) error {
	c.now += c.copyCost
	return nil
}
func (c *clockDevice) Stage([]byte) (uint64, error) { c.now += c.copyCost; return 1 << 40, nil }

func (c *clockDevice) Mark() (Mark, error) {
	c.made++
	c.live++
	return &clockMark{c: c, at: c.now}, nil
}

type clockMark struct {
	c        *clockDevice
	at       float64
	released bool
}

func (m *clockMark) Since(earlier Mark) (float64, error) {
	if m.released || earlier.(*clockMark).released {
		return 0, errors.New("read a released mark")
	}
	if m.c.waitErr > 0 {
		m.c.waitErr--
		if m.c.waitErr == 0 {
			return 0, errors.New("device fault")
		}
	}
	return m.at - earlier.(*clockMark).at, nil
}

func (m *clockMark) Release() error {
	if m.released {
		return errors.New("mark released twice")
	}
	m.released = true
	m.c.released++
	m.c.live--
	return nil
}

func newClockDevice() *clockDevice {
	return &clockDevice{failing: failing{live: map[uint64]bool{}}, gemmCost: 7e-3, copyCost: 1000,
		launchCost: map[kernels.Kernel]float64{kernels.Axpby: 2e-3, kernels.Gather: 5e-3}}
}

// The profile charges each kernel and GEMM its own device time: nothing of a copy issued between
// two operations (copyCost is huge beside them), one mark per operation where they follow each
// other, every mark released once and none read after its release, and the totals the same
// whether the pending marks are read often (a tiny flush threshold) or once.
func TestProfileChargesEachOperation(t *testing.T) {
	d := newClockDevice()
	o := NewOps(d, Options{Profile: true, Unbatched: true})
	n := 64
	x := compute.Mat{Buf: o.Alloc(n), Rows: 1, Cols: n, Stride: n, Batch: 1}
	y := compute.Mat{Buf: o.Alloc(n), Rows: 1, Cols: n, Stride: n, Batch: 1}
	z := compute.Mat{Buf: o.Alloc(n * n), Rows: n, Cols: n, Stride: n, Batch: 1}
	for range 3 {
		o.Axpby(1, x, 2, y, nil) // unbatched: issued at once, nothing staged
	}
	o.Upload(x.Buf, 0, make([]float32, n))
	o.Gemm(false, false, 1, z, z, 0, z)
	o.Gemm(false, false, 1, z, z, 0, z)
	prof, err := o.Profile()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]OpTime{
		"axpby":               {Op: "axpby", Calls: 3, Seconds: 3 * 2e-3},
		"gemm NN 64x64x64 x1": {Op: "gemm NN 64x64x64 x1", Calls: 2, Seconds: 2 * 7e-3},
	}
	if len(prof) != len(want) {
		t.Fatalf("profile %+v, want %d entries", prof, len(want))
	}
	for i, p := range prof {
		w := want[p.Op]
		if p.Calls != w.Calls || math.Abs(p.Seconds-w.Seconds) > 1e-12 {
			t.Errorf("%s: %d calls, %g s; want %d, %g", p.Op, p.Calls, p.Seconds, w.Calls, w.Seconds)
		}
		if i > 0 && p.Seconds > prof[i-1].Seconds {
			t.Errorf("profile not sorted by time: %+v", prof)
		}
	}
	// 3 axpbys back to back (4 marks), the upload ending the run, then 2 GEMMs (3 marks).
	if d.made != 4+3 {
		t.Errorf("%d marks made, want 7", d.made)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if d.live != 0 {
		t.Errorf("%d marks not released after Close", d.live)
	}
	if again, _ := o.Profile(); len(again) != len(want) {
		t.Errorf("Close dropped the totals: %+v", again)
	}
}

// Batched launches (one staged upload, then the launches) share their marks, and reading the
// marks every few operations gives the totals of reading them once.
func TestProfileBatchedAndFlushed(t *testing.T) {
	run := func(flushEvery int) ([]OpTime, *clockDevice) {
		d := newClockDevice()
		o := NewOps(d, Options{Profile: true})
		n := 32
		x := compute.Mat{Buf: o.Alloc(n), Rows: 1, Cols: n, Stride: n, Batch: 1}
		for i := range 20 {
			o.Axpby(1, x, 2, x, nil)
			o.Gather(x, x, []int32{0})
			if flushEvery > 0 && i%flushEvery == 0 {
				o.prof.resolve()
			}
		}
		prof, err := o.Profile()
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		return prof, d
	}
	once, d := run(0)
	if want := 40 + 1; d.made != want { // one mark before the batch's first launch, one after each
		t.Errorf("%d marks made for 40 batched launches, want %d", d.made, want)
	}
	often, _ := run(3)
	for _, prof := range [][]OpTime{once, often} {
		if len(prof) != 2 || prof[0].Op != "gather" || prof[0].Calls != 20 || math.Abs(prof[0].Seconds-20*5e-3) > 1e-12 ||
			prof[1].Op != "axpby" || prof[1].Calls != 20 || math.Abs(prof[1].Seconds-20*2e-3) > 1e-12 {
			t.Errorf("profile %+v, want gather 20 x 5 ms then axpby 20 x 2 ms", prof)
		}
	}
}

// A failed read of a mark ends the profile with that error, keeps the totals read before it,
// releases every mark, and never fails the operations themselves.
func TestProfileErrorKeepsOperationsRunning(t *testing.T) {
	d := newClockDevice()
	d.waitErr = 3 // the third read fails
	o := NewOps(d, Options{Profile: true})
	n := 8
	x := compute.Mat{Buf: o.Alloc(n), Rows: 1, Cols: n, Stride: n, Batch: 1}
	for range 5 {
		o.Axpby(1, x, 2, x, nil)
	}
	prof, err := o.Profile()
	if err == nil {
		t.Fatal("no error from a failed mark")
	}
	if len(prof) != 1 || prof[0].Calls != 2 {
		t.Errorf("profile %+v, want the 2 axpbys read before the failure", prof)
	}
	o.Axpby(1, x, 2, x, nil)
	if err := o.Err(); err != nil {
		t.Errorf("operations failed after the profile did: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if d.live != 0 {
		t.Errorf("%d marks not released", d.live)
	}
	if _, err := NewOps(newClockDevice(), Options{}).Profile(); err == nil {
		t.Error("Profile of an Ops without profiling gave no error")
	}
}
