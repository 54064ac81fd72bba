//go:build !gpu

package cuda

const available = false

func newBackend(int) (Engine, error) { return nil, ErrNotBuilt }

func gpuInfo(int) (*Info, error) { return &Info{Build: "no GPU backend"}, ErrNotBuilt }
