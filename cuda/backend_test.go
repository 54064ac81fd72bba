//go:build gpu

// These tests need an NVIDIA GPU: gorgonia.org/cu initialises the driver when the test binary
// starts and exits with an error message where there is none, so they cannot be skipped
// gracefully. Run them with make test-gpu on a GPU machine.

package cuda_test

import (
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
)

func open(t testing.TB, opt cuda.Options) *cuda.Backend {
	t.Helper()
	be, err := cuda.NewWithOptions(0, opt)
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// Every operation and whole small runs against the CPU backend, with the tolerances stated
// in package paritytest: the CUDA math library's tanh, exp, log, log1p and sincos are within
// 1-2 float64 ulps like glibc's, so the same float32 bounds hold. The harness gets the Backend
// itself, as the shim's test gets cuda.Ops: Close waits for the device (an asynchronous fault
// surfaces there) and reports the first error, by the contract of the Device doc.
func TestParity(t *testing.T) {
	be := open(t, cuda.Options{})
	t.Logf("device: %s", be.Name())
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	paritytest.All(t, func(t *testing.T, opt cuda.Options) paritytest.Backend {
		return open(t, opt)
	})
}

// W1's configuration for 3 rounds and 4 pairs on the GPU and the CPU (tolerances in
// paritytest.W1MatchesCPU).
func TestW1MatchesCPU(t *testing.T) {
	be := open(t, cuda.Options{})
	defer func() {
		if err := be.Close(); err != nil {
			t.Error(err)
		}
	}()
	paritytest.W1MatchesCPU(t, be, 3, 4)
}

// A failed allocation is reported by Err, and no later operation does anything.
func TestOutOfMemoryIsAnError(t *testing.T) {
	be := open(t, cuda.Options{})
	defer be.Close()
	_, total, err := be.FreeMemory()
	if err != nil {
		t.Fatal(err)
	}
	be.Alloc(int(total/4) * 2) // twice the device's memory
	if be.Err() == nil {
		t.Fatal("allocating twice the device memory gave no error")
	}
	t.Logf("error as reported: %v", be.Err())
}
