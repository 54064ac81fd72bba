package experiment

import (
	"slices"
	"testing"
)

// A GPU training logs the tuning variables it runs with, and warns of a misspelt one and of a
// switch set to something other than 1.
func TestGPUEnvLines(t *testing.T) {
	for _, tc := range []struct {
		environ []string
		want    []string
	}{
		{[]string{"PATH=/bin"}, nil},
		{[]string{"FEDAUDIT_CUDA_PATCHCONV=1", "FEDAUDIT_CUDA_SPLITK=1"}, []string{"gpu: options from the environment: FEDAUDIT_CUDA_PATCHCONV=1 FEDAUDIT_CUDA_SPLITK=1"}},
		{[]string{"FEDAUDIT_CUDA_SPLITKK=1"}, []string{"gpu: warning: environment variable FEDAUDIT_CUDA_SPLITKK is not an option of the GPU backend " +
			"(it reads FEDAUDIT_CUDA_GRAPHS, FEDAUDIT_CUDA_PROFILE, FEDAUDIT_CUDA_SYNC, FEDAUDIT_CUDA_SPLITK, " +
			"FEDAUDIT_CUDA_BIASCOPIES, FEDAUDIT_CUDA_PATCHCONV, FEDAUDIT_CUDA_WINOGRAD2, FEDAUDIT_CUDA_ROWGROUP, FEDAUDIT_CUDA_LIGHTITEMS, FEDAUDIT_CUDA_HIDDENBLOCK, " +
			"FEDAUDIT_CUDA_CLIENTBATCH, FEDAUDIT_CUDA_DWROWS)"}},
		{[]string{"FEDAUDIT_CUDA_PATCHCONV=yes"}, []string{"gpu: warning: FEDAUDIT_CUDA_PATCHCONV=yes: the option is on only with the value 1, so it stays off"}},
		// An option that became the default says what to do instead.
		{[]string{"FEDAUDIT_CUDA_WINOGRAD=1"}, []string{"gpu: warning: environment variable FEDAUDIT_CUDA_WINOGRAD is no longer read: " +
			"Winograd's F(4x4, 3x3) is the default for the convolutions it fits; FEDAUDIT_CUDA_PATCHCONV=1 computes them by patches"}},
	} {
		if got := GPUEnvLines(tc.environ); !slices.Equal(got, tc.want) {
			t.Errorf("GPUEnvLines(%q) =\n%q\nwant\n%q", tc.environ, got, tc.want)
		}
	}
}
