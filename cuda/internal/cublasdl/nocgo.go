//go:build !cgo

package cublasdl

import "errors"

// Library is a loaded cuBLAS; builds without cgo cannot load one.
type Library struct {
	Name, File, Version, Source string
	Major                       int
}

// Load reports that a build without cgo cannot load cuBLAS.
func Load() (*Library, error) { return nil, errors.New("cuBLAS: this build has no cgo") }
