package cuda

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// The tuning variables are sorted into those NewOps reads and the unknown ones (a misspelt
// option), and nothing else in the environment is looked at.
func TestEnvSettings(t *testing.T) {
	for _, tc := range []struct {
		name         string
		environ      []string
		set, unknown []string
	}{
		{"none", []string{"PATH=/bin", "HOME=/root"}, nil, nil},
		{"known", []string{"FEDAUDIT_CUDA_WINOGRAD=1", "PATH=/bin", "FEDAUDIT_CUDA_ROWGROUP=4"},
			[]string{"FEDAUDIT_CUDA_WINOGRAD=1", "FEDAUDIT_CUDA_ROWGROUP=4"}, nil},
		{"misspelt", []string{"FEDAUDIT_CUDA_WINOGARD=1", "FEDAUDIT_CUDA_SPLITK=1"},
			[]string{"FEDAUDIT_CUDA_SPLITK=1"}, []string{"FEDAUDIT_CUDA_WINOGARD"}},
		{"other prefixes", []string{"FEDAUDIT_CUBLAS=/lib/libcublas.so", "FEDAUDIT_BENCH_R=8", "FEDAUDIT_CUDA="},
			nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, unknown := EnvSettings(tc.environ)
			if !slices.Equal(set, tc.set) || !slices.Equal(unknown, tc.unknown) {
				t.Errorf("EnvSettings(%q) = %q, %q; want %q, %q", tc.environ, set, unknown, tc.set, tc.unknown)
			}
		})
	}
}

// Every variable NewOps reads is one EnvSettings knows: the list is written out beside the
// constants, so a new option must be added to it.
func TestEnvSettingsKnowsEveryOption(t *testing.T) {
	for _, name := range []string{GraphEnv, ProfileEnv, SyncEnv, SplitKEnv, DirectConvEnv, BiasCopiesEnv, WinogradEnv,
		RowGroupEnv, LightItemsEnv, HiddenBlockEnv, ClientBatchEnv} {
		if set, _ := EnvSettings([]string{name + "=1"}); len(set) != 1 {
			t.Errorf("%s is not among the known options", name)
		}
	}
}

// gpu-info shows the options set and warns of an unknown one.
func TestInfoShowsOptionsAndWarnings(t *testing.T) {
	in := &Info{Build: "gpu"}
	in.addEnv([]string{"FEDAUDIT_CUDA_WINOGRAD=1", "FEDAUDIT_CUDA_WINOGARD=1"})
	var b bytes.Buffer
	in.Write(&b)
	out := b.String()
	for _, want := range []string{"\noptions:       FEDAUDIT_CUDA_WINOGRAD=1\n", "\nwarning:       environment variable FEDAUDIT_CUDA_WINOGARD is not an option"} {
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
