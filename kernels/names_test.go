package kernels

import (
	"os"
	"regexp"
	"slices"
	"strconv"
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

// The Go constants that choose hidden_step's launch (its shared memory and block size) are the
// ones step.cu compiles with: a kernel given less shared memory than Go assumes would overflow it.
func TestHiddenConstantsMatchStepCU(t *testing.T) {
	src, err := os.ReadFile("step.cu")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"HIDDEN_SHARED_FLOATS": HiddenSharedFloats, "HIDDEN_BLOCK": HiddenBlock} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("step.cu defines no %s", name)
		}
		if got, _ := strconv.Atoi(string(m[1])); got != want {
			t.Errorf("step.cu: %s %d, Go constant %d", name, got, want)
		}
	}
}
