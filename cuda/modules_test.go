package cuda

import (
	"errors"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/kernels"
)

// errNotFound stands for the driver's CUDA_ERROR_NOT_FOUND.
var errNotFound = errors.New("CUDA_ERROR_NOT_FOUND")

// The kernel lookup asks each module only for names it declares, once per kernel: no
// CUDA_ERROR_NOT_FOUND for compute-sanitizer to report (issue 27 counted 48 per backend opened
// when every name was tried in every module in turn), and every kernel found in its own module.
func TestLookupAsksOnlyTheDefiningModule(t *testing.T) {
	mods, err := kernels.Modules()
	if err != nil {
		t.Fatal(err)
	}
	type fn struct{ mod, name string }
	calls, notFound := 0, 0
	fns, err := lookupKernels(mods, func(i int, name string) (fn, error) {
		calls++
		if !slices.Contains(mods[i].Entries(), name) {
			notFound++
			return fn{}, errNotFound
		}
		return fn{mods[i].Name, name}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if notFound != 0 {
		t.Errorf("%d lookups asked a module for a name it does not declare (CUDA_ERROR_NOT_FOUND under compute-sanitizer)", notFound)
	}
	if calls != len(kernels.All()) {
		t.Errorf("%d lookups for %d kernels", calls, len(kernels.All()))
	}
	for _, k := range kernels.All() {
		if fns[k].name != k.Name() {
			t.Errorf("kernel %s: got the function %s of %s", k, fns[k].name, fns[k].mod)
		}
	}
	// A failed lookup in the right module is an error naming the kernel and the module.
	_, err = lookupKernels(mods, func(i int, name string) (fn, error) {
		if name == kernels.HiddenStep.Name() {
			return fn{}, errNotFound
		}
		return fn{mods[i].Name, name}, nil
	})
	if !errors.Is(err, errNotFound) || err.Error() != "kernel hidden_step in PTX module step: CUDA_ERROR_NOT_FOUND" {
		t.Errorf("a failed lookup: %v", err)
	}
}
