//go:build cgo

package hostshim

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
	"github.com/fedaudit/fedaudit/kernels"
)

// The shim library is compiled once per test binary, into buildDir, which TestMain removes.
var (
	buildOnce sync.Once
	buildDir  string
	buildLib  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// builtLibEnv names, in a child test process, the shim library its parent built: a child that
// ends in a crash on purpose (TestASanCatchesOutOfBounds) never reaches TestMain's removal of
// a library it would build.
const builtLibEnv = "FEDAUDIT_SHIM_TEST_LIB"

// build compiles the shim library once per test binary (or takes the parent's, builtLibEnv)
// into buildLib, or sets buildErr.
func build() {
	buildOnce.Do(func() {
		if lib := os.Getenv(builtLibEnv); lib != "" {
			buildLib = lib
			return
		}
		dir, err := os.MkdirTemp("", "hostshim")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		var d *Device
		d, buildErr = Build(filepath.Join("..", "..", "kernels"), "cxx", dir)
		if buildErr == nil {
			buildLib = filepath.Join(dir, "libfedaudit_shim.so")
			d.Close()
		}
	})
}

// device returns a fresh shim device (its own allocations) over the shared library, and
// checks at the end of the test that everything it allocated was freed.
func device(t *testing.T) *Device {
	t.Helper()
	build()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	d, err := Load(buildLib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n := d.Live(); n != 0 {
			t.Errorf("%d device allocations leaked", n)
		}
		d.Close()
	})
	return d
}

// The factory hands the harness cuda.Ops itself: its Close is the same code as the GPU
// backend's (Ops.Close, then the driver device's release), so both report the same.
func TestParity(t *testing.T) {
	paritytest.All(t, func(t *testing.T, opt cuda.Options) paritytest.Backend {
		return cuda.NewOps(device(t), opt)
	})
}

// Every kernel the Go side knows is in the shim's table with the parameter count the Go side
// passes (a mismatch would make Launch fail in every parity test, this names it directly).
func TestShimKnowsEveryKernel(t *testing.T) {
	d := device(t)
	for _, k := range kernels.All() {
		if d.NumArgs(k) == 0 {
			t.Errorf("kernel %s has no parameters in the shim", k)
		}
	}
}

// W1 itself (784-64-10, d = 50 890) through Ops on the shim against the CPU backend: one round,
// one pair (the shim's SGEMM is naive, so this is what a test can afford; the GPU test runs 3
// rounds and 4 pairs).
func TestW1MatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("W1 on the shim takes several seconds")
	}
	d := device(t)
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	paritytest.W1MatchesCPU(t, ops, 1, 1)
}

// The shim's products sum in order, so the parity tests that compare calls grouped differently
// (ClientGroupsKeepBits) hold it to the same bits, where a GPU gets a tolerance.
func TestShimGemmInOrder(t *testing.T) {
	ops := cuda.NewOps(device(t), cuda.Options{})
	defer ops.Close()
	if !ops.GemmInOrder() {
		t.Fatal("the shim's Ops does not report products summed in order")
	}
}
