//go:build gpu

package cuda_test

import (
	"os"
	"testing"
)

// The test binary itself (a gpu build, as the validation kit ships it) needs no libcublas.
func TestThisBinaryDoesNotLinkCublas(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	checkNeeded(t, exe)
}
