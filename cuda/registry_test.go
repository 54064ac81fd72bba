//go:build !gpu

package cuda

import (
	"errors"
	"testing"
)

func TestNoGPUBuild(t *testing.T) {
	if Available() {
		t.Error("Available() = true in a build without the gpu tag")
	}
	be, err := NewBackend(0)
	if be != nil || !errors.Is(err, ErrNotBuilt) {
		t.Errorf("NewBackend(0) = %v, %v; want nil, ErrNotBuilt", be, err)
	}
	if got := err.Error(); got != "this build has no GPU backend (build with -tags gpu)" {
		t.Errorf("error text %q", got)
	}
}
