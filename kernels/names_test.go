package kernels

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
		if got, want := len(m.Entries()), len(entry.FindAllStringSubmatch(m.PTX, -1)); got != want {
			t.Errorf("%s: Entries finds %d entry points, the plain pattern %d", m.Name, got, want)
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

// Locate puts every kernel in the module whose PTX declares it (the .cu file it is written in)
// and in no other; it refuses a kernel declared nowhere or twice.
func TestLocate(t *testing.T) {
	mods, err := Modules()
	if err != nil {
		t.Fatal(err)
	}
	where, err := Locate(mods)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range All() {
		for i, m := range mods {
			if declares := slices.Contains(m.Entries(), k.Name()); declares != (where[k] == i) {
				t.Errorf("kernel %s located in %s, declared in %s: %v", k, mods[where[k]].Name, m.Name, declares)
			}
		}
		src, err := os.ReadFile(mods[where[k]].Name + ".cu")
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`__global__.*\b` + k.Name() + `\(`).Match(src) {
			t.Errorf("kernel %s located in %s.ptx, but %s.cu does not define it", k, mods[where[k]].Name, mods[where[k]].Name)
		}
	}
	if _, err := Locate(mods[:1]); err == nil || !strings.Contains(err.Error(), "axpby is in no PTX module") {
		t.Errorf("Locate without elementwise.ptx: %v", err)
	}
	twice := append(slices.Clone(mods), Module{Name: "copy", PTX: mods[0].PTX})
	if _, err := Locate(twice); err == nil || !strings.Contains(err.Error(), "in several PTX modules ("+mods[0].Name+", copy)") {
		t.Errorf("Locate with a module declared twice: %v", err)
	}
}

// The Go constants that size the direct convolutions' launches are the tiles conv.cu compiles
// with: a launch sized for larger tiles than the kernel's would leave values uncomputed.
func TestConvTilesMatchConvCU(t *testing.T) {
	src, err := os.ReadFile("conv.cu")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"CONV_PX": ConvPX, "CONV_DX_PX": ConvDXPX, "CONV_CT": ConvCT, "CONV_COT": ConvCOT, "CONV_JT": ConvJT} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("conv.cu defines no %s", name)
		}
		if got, _ := strconv.Atoi(string(m[1])); got != want {
			t.Errorf("conv.cu: %s %d, Go constant %d", name, got, want)
		}
	}
}

// W1's replica (B 32, H 64, C 10) and heads of similar size must keep hidden_step's working set in
// shared memory: global scratch is correct but slower, so a layout change that pushes them out
// would cost time silently.
func TestHiddenWorkingSetFitsSharedMemory(t *testing.T) {
	for _, c := range []struct{ B, H, C int }{{32, 64, 10}, {16, 128, 10}, {32, 100, 10}} {
		if n := HiddenWorkingSet(c.B, c.H, c.C); n > HiddenSharedFloats {
			t.Errorf("B %d H %d C %d: working set %d floats, shared memory %d", c.B, c.H, c.C, n, HiddenSharedFloats)
		}
	}
	if n := HiddenWorkingSet(64, 112, 10); n <= HiddenSharedFloats {
		t.Errorf("the parity suite's global-scratch case (B 64, H 112, C 10) fits shared memory (%d floats)", n)
	}
}

// How many pieces each partial sum of a long inner product is split into: none below 2^19
// values (W1's and LeNet-5's parameter rows), up to 32 for ResNet-18's 11.2 M, from the row
// length alone.
func TestPartialsFold(t *testing.T) {
	for _, c := range []struct{ cols, want int }{
		{0, 1}, {50_890, 1}, {61_706, 1}, {1<<19 - 1, 1}, {1 << 19, 2}, {1 << 20, 4},
		{1<<20 + 37, 4}, {11_220_132, 32}, {1 << 30, 32},
	} {
		if got := PartialsFold(c.cols); got != c.want {
			t.Errorf("PartialsFold(%d) = %d, want %d", c.cols, got, c.want)
		}
	}
}

// GroupNorm's gradient sums split a channel's pixels into runs: one run up to 127 pixels, then
// twice as many at each doubling while every run keeps at least 64 pixels, at most 32:
// ResNet-18's first stage (32 x 32 pixels) takes 16, its second 4, its third and fourth 1. The
// scratch holds two sums per run, channel and sample, and two folds where there are runs.
func TestGroupNormPixelSlices(t *testing.T) {
	for _, c := range []struct{ hw, want int }{
		{1, 1}, {16, 1}, {64, 1}, {127, 1}, {128, 2}, {255, 2}, {256, 4}, {1024, 16},
		{4096, 32}, {1 << 30, 32},
	} {
		if got := GroupNormPixelSlices(c.hw); got != c.want {
			t.Errorf("GroupNormPixelSlices(%d) = %d, want %d", c.hw, got, c.want)
		}
	}
	if got, want := GroupNormGradScratch(8, 64, 32, 1024), 2*8*64*32*16+2*8*64*32; got != want {
		t.Errorf("GroupNormGradScratch of ResNet-18's first stage at 8 replicas: %d, want %d", got, want)
	}
	if got, want := GroupNormGradScratch(8, 512, 32, 16), 2*8*512*32; got != want {
		t.Errorf("GroupNormGradScratch of its last stage: %d, want %d", got, want)
	}
}
