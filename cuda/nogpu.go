//go:build !gpu

package cuda

const available = false

func newBackend(int) (Engine, error) { return nil, ErrNotBuilt }
