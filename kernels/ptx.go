package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
)

// The PTX is generated from the .cu sources by go generate (nvcc -ptx for compute_70, which
// the driver compiles just in time for Volta and every later architecture) and committed.
//
//go:embed *.ptx
var ptxFiles embed.FS

// Module is one PTX module: the kernels of one .cu file.
type Module struct {
	Name string // the .cu file's base name
	PTX  string
}

// Modules returns the embedded PTX modules in name order.
func Modules() ([]Module, error) {
	names, err := fs.Glob(ptxFiles, "*.ptx")
	if err != nil {
		return nil, fmt.Errorf("kernels: list PTX: %w", err)
	}
	sort.Strings(names)
	mods := make([]Module, 0, len(names))
	for _, n := range names {
		b, err := ptxFiles.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("kernels: read %s: %w", n, err)
		}
		mods = append(mods, Module{Name: n[:len(n)-len(".ptx")], PTX: string(b)})
	}
	return mods, nil
}
