package cuda

import (
	"fmt"

	"github.com/fedaudit/fedaudit/kernels"
)

// lookupKernels returns every kernel's function, indexed by kernels.Kernel, asking each module
// only for the entry points its PTX declares (kernels.Locate): function(i, name) looks name up
// in the loaded mods[i]. The driver device uses it (gpu-info, which counts the kernels found
// and goes on after a failure, walks kernels.Locate itself); asking a module for a name it
// lacks is a CUDA_ERROR_NOT_FOUND from cuModuleGetFunction, which compute-sanitizer reports as
// an API error (issue 27: 48 per backend opened when every name was tried in every module).
func lookupKernels[F any](mods []kernels.Module, function func(mod int, name string) (F, error)) ([]F, error) {
	where, err := kernels.Locate(mods)
	if err != nil {
		return nil, err
	}
	fns := make([]F, len(where))
	for _, k := range kernels.All() {
		m := where[k]
		f, err := function(m, k.Name())
		if err != nil {
			return nil, fmt.Errorf("kernel %s in PTX module %s: %w", k.Name(), mods[m].Name, err)
		}
		fns[k] = f
	}
	return fns, nil
}
