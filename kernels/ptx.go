package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
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

// entryRE matches an entry point's declaration in PTX (".visible .entry name(").
var entryRE = regexp.MustCompile(`\.entry\s+(\w+)\s*\(`)

// Entries returns the names of the entry points the module's PTX declares, in file order.
func (m Module) Entries() []string {
	var out []string
	for _, e := range entryRE.FindAllStringSubmatch(m.PTX, -1) {
		out = append(out, e[1])
	}
	return out
}

// Locate returns, for every kernel (indexed by Kernel), the index in mods of the module whose
// PTX declares its entry point, so that a loader asks each module only for the names it
// defines: the driver answers a name a module lacks with CUDA_ERROR_NOT_FOUND, which
// compute-sanitizer counts as an API error (issue 27: 48 per backend opened when every name
// was tried in every module). It fails, naming them, when a kernel is declared by no module
// or by several.
func Locate(mods []Module) ([]int, error) {
	where := map[string][]int{}
	for i, m := range mods {
		for _, e := range m.Entries() {
			where[e] = append(where[e], i)
		}
	}
	out := make([]int, numKernels)
	var problems []string
	for _, k := range All() {
		switch in := where[k.Name()]; len(in) {
		case 1:
			out[k] = in[0]
		case 0:
			problems = append(problems, fmt.Sprintf("kernel %s is in no PTX module", k.Name()))
		default:
			var names []string
			for _, i := range in {
				names = append(names, mods[i].Name)
			}
			problems = append(problems, fmt.Sprintf("kernel %s is in several PTX modules (%s)", k.Name(), strings.Join(names, ", ")))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("kernels: %s", strings.Join(problems, "; "))
	}
	return out, nil
}
