package cuda

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
)

// The tuning variables are read as NewOps reads them: a switch changes something with 1 only,
// a count with a positive integer; an empty value, or 0 for a switch, is the default. Every
// other variable with the prefix, a misspelt name or a value that changes nothing, is named
// with why, and nothing outside the prefix is looked at.
func TestEnvSettings(t *testing.T) {
	for _, tc := range []struct {
		name          string
		environ       []string
		set, problems []string
	}{
		{"none", []string{"PATH=/bin", "HOME=/root"}, nil, nil},
		{"known", []string{"FEDAUDIT_CUDA_PATCHCONV=1", "PATH=/bin", "FEDAUDIT_CUDA_ROWGROUP=4"},
			[]string{"FEDAUDIT_CUDA_PATCHCONV=1", "FEDAUDIT_CUDA_ROWGROUP=4"}, nil},
		{"defaults", []string{"FEDAUDIT_CUDA_PATCHCONV=0", "FEDAUDIT_CUDA_SPLITK=", "FEDAUDIT_CUDA_ROWGROUP="}, nil, nil},
		{"misspelt", []string{"FEDAUDIT_CUDA_WINOGARD=1", "FEDAUDIT_CUDA_SPLITK=1"},
			[]string{"FEDAUDIT_CUDA_SPLITK=1"}, []string{"environment variable FEDAUDIT_CUDA_WINOGARD is not an option"}},
		{"a switch not 1", []string{"FEDAUDIT_CUDA_PATCHCONV=true"}, nil,
			[]string{"FEDAUDIT_CUDA_PATCHCONV=true: the option is on only with the value 1, so it stays off"}},
		{"a kernel choice not offered", []string{"FEDAUDIT_CUDA_DWROWS=3", "FEDAUDIT_CUDA_DWROWS=4"}, []string{"FEDAUDIT_CUDA_DWROWS=4"},
			[]string{"FEDAUDIT_CUDA_DWROWS=3: only 2 and 4 choose a weight gradient kernel"}},
		{"a count not positive", []string{"FEDAUDIT_CUDA_CLIENTBATCH=0", "FEDAUDIT_CUDA_ROWGROUP=four"}, nil,
			[]string{"FEDAUDIT_CUDA_CLIENTBATCH=0: not a positive integer", "FEDAUDIT_CUDA_ROWGROUP=four: not a positive integer"}},
		{"an option overridden", []string{"FEDAUDIT_CUDA_WINOGRAD2=1", "FEDAUDIT_CUDA_PATCHCONV=1"}, []string{"FEDAUDIT_CUDA_PATCHCONV=1"},
			[]string{"FEDAUDIT_CUDA_WINOGRAD2=1 changes nothing beside FEDAUDIT_CUDA_PATCHCONV=1"}},
		{"a weight gradient kernel overridden", []string{"FEDAUDIT_CUDA_DWROWS=2", "FEDAUDIT_CUDA_PATCHCONV=1"}, []string{"FEDAUDIT_CUDA_PATCHCONV=1"},
			[]string{"FEDAUDIT_CUDA_DWROWS=2 changes nothing beside FEDAUDIT_CUDA_PATCHCONV=1"}},
		{"options that became the default", []string{"FEDAUDIT_CUDA_WINOGRAD4=1", "FEDAUDIT_CUDA_DIRECTCONV=1", "FEDAUDIT_CUDA_WINOGRAD=1"}, nil,
			[]string{"environment variable FEDAUDIT_CUDA_WINOGRAD4 is no longer read: Winograd's F(4x4, 3x3) is the default for the convolutions it fits; FEDAUDIT_CUDA_WINOGRAD2=1",
				"environment variable FEDAUDIT_CUDA_DIRECTCONV is no longer read: the direct kernels are the default for the small convolutions they fit; FEDAUDIT_CUDA_PATCHCONV=1",
				"environment variable FEDAUDIT_CUDA_WINOGRAD is no longer read: Winograd's F(4x4, 3x3) is the default"}},
		{"other prefixes", []string{"FEDAUDIT_CUBLAS=/lib/libcublas.so", "FEDAUDIT_BENCH_R=8", "FEDAUDIT_CUDA="}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, problems := EnvSettings(tc.environ)
			ok := slices.Equal(set, tc.set) && len(problems) == len(tc.problems)
			for i := 0; ok && i < len(problems); i++ {
				ok = strings.HasPrefix(problems[i], tc.problems[i])
			}
			if !ok {
				t.Errorf("EnvSettings(%q) = %q, %q; want %q and problems starting %q", tc.environ, set, problems, tc.set, tc.problems)
			}
		})
	}
}

// Every variable NewOps reads is one EnvSettings knows, and reads as NewOps does: the list is
// written out beside the constants, so a new option must be added to it. A switch is on at 1
// (an Ops reading it has the option on: PatchConv's is checked), a count at a positive integer.
func TestEnvSettingsKnowsEveryOption(t *testing.T) {
	switches := []string{GraphEnv, ProfileEnv, SyncEnv, SplitKEnv, BiasCopiesEnv, PatchConvEnv, Winograd2Env}
	counts := []string{RowGroupEnv, LightItemsEnv, HiddenBlockEnv, ClientBatchEnv, DirectDWRowsEnv}
	for _, name := range append(switches, counts...) {
		on := "1"
		if name == DirectDWRowsEnv { // a kernel's choice: 2 or 4
			on = "2"
		}
		if set, problems := EnvSettings([]string{name + "=" + on}); len(set) != 1 || len(problems) != 0 {
			t.Errorf("%s=%s: set %q, problems %q", name, on, set, problems)
		}
	}
	for _, name := range switches {
		if set, problems := EnvSettings([]string{name + "=2"}); len(set) != 0 || len(problems) != 1 {
			t.Errorf("%s=2 (a switch): set %q, problems %q", name, set, problems)
		}
	}
	for _, name := range counts {
		if set, problems := EnvSettings([]string{name + "=2"}); len(set) != 1 || len(problems) != 0 {
			t.Errorf("%s=2 (a count): set %q, problems %q", name, set, problems)
		}
	}
	for _, tc := range []struct {
		env  []string
		opt  Options
		want compute.WinogradTile
	}{
		{nil, Options{}, compute.WinogradF4},
		{[]string{PatchConvEnv, "true"}, Options{}, compute.WinogradF4}, // EnvSettings warns that it changes nothing
		{[]string{PatchConvEnv, "1"}, Options{}, 0},
		{nil, Options{PatchConv: true}, 0},
		{[]string{Winograd2Env, "1"}, Options{}, compute.WinogradF2},
		{nil, Options{Winograd2: true}, compute.WinogradF2},
		{[]string{Winograd2Env, "yes"}, Options{}, compute.WinogradF4},
		{[]string{Winograd2Env, "1"}, Options{PatchConv: true}, 0},                // patches whatever the form
		{[]string{"FEDAUDIT_CUDA_WINOGRAD4", "1"}, Options{}, compute.WinogradF4}, // no longer read
	} {
		if tc.env != nil {
			t.Setenv(tc.env[0], tc.env[1])
		}
		o := NewOps(&recorder{}, tc.opt)
		if got := o.WinogradTile(); got != tc.want {
			t.Errorf("%v with %+v: the convolutions by %v, want %v", tc.env, tc.opt, got, tc.want)
		}
		// The direct kernels go with Winograd's form: both are off by patches only.
		if o.direct != (tc.want != 0) {
			t.Errorf("%v with %+v: the direct kernels on %v, want %v", tc.env, tc.opt, o.direct, tc.want != 0)
		}
		if tc.env != nil {
			t.Setenv(tc.env[0], "")
		}
	}
}

// gpu-info shows the options set and warns of an unknown one.
func TestInfoShowsOptionsAndWarnings(t *testing.T) {
	in := &Info{Build: "gpu"}
	in.addEnv([]string{"FEDAUDIT_CUDA_PATCHCONV=1", "FEDAUDIT_CUDA_PATCHCOVN=1"})
	var b bytes.Buffer
	in.Write(&b)
	out := b.String()
	for _, want := range []string{"\noptions:       FEDAUDIT_CUDA_PATCHCONV=1\n", "\nwarning:       environment variable FEDAUDIT_CUDA_PATCHCOVN is not an option"} {
		if !strings.Contains(out, want) {
			t.Errorf("gpu-info lacks %q:\n%s", want, out)
		}
	}
	in = &Info{Build: "gpu"}
	in.addEnv(nil)
	b.Reset()
	in.Write(&b)
	if !strings.Contains(b.String(), "\noptions:       defaults") {
		t.Errorf("gpu-info without options:\n%s", b.String())
	}
}
