package kernels

import (
	"regexp"
	"slices"
	"testing"
)

// Every named kernel is an entry point of the embedded PTX and every entry point has a name:
// a kernel added to a .cu file without a name, or renamed in one place only, fails here
// rather than at the first launch on a GPU.
func TestNamesMatchPTX(t *testing.T) {
	mods, err := Modules()
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`\.entry (\w+)\(`)
	var inPTX []string
	for _, m := range mods {
		for _, e := range entry.FindAllStringSubmatch(m.PTX, -1) {
			inPTX = append(inPTX, e[1])
		}
	}
	var named []string
	for _, k := range All() {
		named = append(named, k.Name())
	}
	slices.Sort(inPTX)
	slices.Sort(named)
	if !slices.Equal(inPTX, named) {
		t.Errorf("PTX entry points %v, named kernels %v", inPTX, named)
	}
}
