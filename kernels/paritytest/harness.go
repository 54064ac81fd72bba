package hostshim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/fedaudit/fedaudit/kernels"
	"github.com/fedaudit/fedaudit/train"
)

// The shim library is compiled once per test binary.
var (
	buildOnce sync.Once
	buildLib  string
	buildErr  error
)

// device returns a fresh shim device (its own allocations) over the shared library.
func device(t testing.TB) *Device {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hostshim")
		if err != nil {
			buildErr = err
			return
		}
		var d *Device
		d, buildErr = Build("..", dir)
		if buildErr == nil {
			buildLib = dir + "/libfedaudit_shim.so"
			d.Close()
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	d, err := Load(buildLib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// launchConfigs are the launch configurations every operation is checked under: the default,
// and a tiny one that makes every grid-stride loop wrap many times and leaves partial blocks.
var launchConfigs = []kernels.Options{{}, {Block: 7, MaxGrid: 3}}

// twin runs an operation on the CPU backend and on kernels.Ops over the shim side by side.
type twin struct {
	t    *testing.T
	cpu  *train.CPU
	ops  *kernels.Ops
	dev  *Device
	rng  *rand.Rand
	bufs [][2]train.Buffer
}

func newTwin(t *testing.T, opt kernels.Options) *twin {
	dev := device(t)
	w := &twin{t: t, cpu: train.NewCPU(2), ops: kernels.NewOps(dev, opt), dev: dev, rng: rand.New(rand.NewPCG(1, 2))}
	t.Cleanup(func() {
		w.cpu.Close()
		if err := w.ops.Close(); err != nil {
			t.Error(err)
		}
		if n := dev.Live(); n != 0 {
			t.Errorf("%d allocations leaked", n)
		}
	})
	return w
}

// buf allocates n values on both backends, filled with the same values from fill.
func (w *twin) buf(n int, fill func(i int) float32) int {
	h := make([]float32, n)
	for i := range h {
		h[i] = fill(i)
	}
	c, g := w.cpu.Alloc(n), w.ops.Alloc(n)
	w.cpu.Upload(c, 0, h)
	w.ops.Upload(g, 0, h)
	w.bufs = append(w.bufs, [2]train.Buffer{c, g})
	return len(w.bufs) - 1
}

func (w *twin) normal(n int) int {
	return w.buf(n, func(int) float32 { return float32(w.rng.NormFloat64()) })
}

// mat returns m over buffer id on the CPU (0) and shim (1) side.
func (w *twin) mat(id int, m train.Mat) [2]train.Mat {
	var out [2]train.Mat
	for s := 0; s < 2; s++ {
		out[s] = m
		out[s].Buf = w.bufs[id][s]
	}
	return out
}

// get downloads buffer id from both sides.
func (w *twin) get(id int) (cpu, shim []float32) {
	n := w.bufs[id][0].Len()
	cpu, shim = make([]float32, n), make([]float32, n)
	w.cpu.Download(cpu, w.bufs[id][0], 0)
	w.ops.Download(shim, w.bufs[id][1], 0)
	if err := w.ops.Err(); err != nil {
		w.t.Fatal(err)
	}
	return cpu, shim
}

// ulps is the distance between a and b in units in the last place of float32 (0 for equal
// values, including two NaNs).
func ulps(a, b float32) int64 {
	if a == b || (a != a && b != b) {
		return 0
	}
	if a != a || b != b {
		return math.MaxInt64
	}
	ia, ib := int64(int32(math.Float32bits(a))), int64(int32(math.Float32bits(b)))
	if ia < 0 {
		ia = math.MinInt32 - ia
	}
	if ib < 0 {
		ib = math.MinInt32 - ib
	}
	if ia > ib {
		return ia - ib
	}
	return ib - ia
}

// sameULP fails when any pair of values is more than maxULP apart.
func (w *twin) sameULP(id int, maxULP int64, what string) {
	w.t.Helper()
	cpu, shim := w.get(id)
	bad := 0
	for i := range cpu {
		if d := ulps(cpu[i], shim[i]); d > maxULP {
			if bad < 5 {
				w.t.Errorf("%s: element %d: cpu %v (%08x), kernels %v (%08x): %d ulp apart, want <= %d",
					what, i, cpu[i], math.Float32bits(cpu[i]), shim[i], math.Float32bits(shim[i]), d, maxULP)
			}
			bad++
		}
	}
	if bad > 5 {
		w.t.Errorf("%s: %d elements differ in all", what, bad)
	}
}

// near fails when |cpu - shim| > tol(i, cpu) for any element.
func (w *twin) near(id int, what string, tol func(i int, ref float32) float64) {
	w.t.Helper()
	cpu, shim := w.get(id)
	bad := 0
	for i := range cpu {
		d := math.Abs(float64(cpu[i]) - float64(shim[i]))
		if !(d <= tol(i, cpu[i])) && !(cpu[i] != cpu[i] && shim[i] != shim[i]) {
			if bad < 5 {
				w.t.Errorf("%s: element %d: cpu %v, kernels %v, difference %g above %g", what, i, cpu[i], shim[i], d, tol(i, cpu[i]))
			}
			bad++
		}
	}
}

func cfgName(o kernels.Options) string {
	if o.Block == 0 {
		return "default-launch"
	}
	return fmt.Sprintf("block%d-grid%d", o.Block, o.MaxGrid)
}
