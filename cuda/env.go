package cuda

import (
	"slices"
	"strings"
)

// EnvPrefix starts the name of every environment variable that tunes the GPU backend.
const EnvPrefix = "FEDAUDIT_CUDA_"

// tuningEnv are the environment variables NewOps reads, each turning on or setting one field
// of Options.
var tuningEnv = []string{
	GraphEnv, ProfileEnv, SyncEnv, SplitKEnv, DirectConvEnv, BiasCopiesEnv, WinogradEnv,
	RowGroupEnv, LightItemsEnv, HiddenBlockEnv, ClientBatchEnv,
}

// EnvSettings sorts the variables of environ (os.Environ's NAME=VALUE form) that start with
// EnvPrefix into those the backend reads (set, as NAME=VALUE, in environ's order) and those it
// does not know (unknown, their names): a misspelt option would otherwise be ignored without
// a word, and a benchmark timed without the option it was meant to time.
func EnvSettings(environ []string) (set, unknown []string) {
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		if slices.Contains(tuningEnv, name) {
			set = append(set, kv)
		} else {
			unknown = append(unknown, name)
		}
	}
	return set, unknown
}

// UnknownEnvProblem describes an unknown tuning variable for a log line or a warning.
func UnknownEnvProblem(name string) string {
	return "environment variable " + name + " is not an option of the GPU backend (it reads " + strings.Join(tuningEnv, ", ") + ")"
}
