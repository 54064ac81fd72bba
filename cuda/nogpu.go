//go:build !gpu

package cuda

const available = false

func newBackend(int) (Engine, error) { return nil, ErrNotBuilt }

func deviceCount() (int, error) { return 0, ErrNotBuilt }

func gpuInfo(int) (*Info, error) { return &Info{Build: "no GPU backend"}, ErrNotBuilt }
