package cuda

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// EnvPrefix starts the name of every environment variable that tunes the GPU backend.
const EnvPrefix = "FEDAUDIT_CUDA_"

// SwitchOn reports whether the environment turns on the switch name (one of the backend's
// tuning variables that are switches, as GraphEnv): the value 1, and nothing else.
func SwitchOn(name string) bool { return os.Getenv(name) == "1" }

// tuningEnv are the environment variables NewOps reads, each turning on or setting one field
// of Options: a switch, on with the value 1 only, or a count, a positive integer.
var tuningEnv = []struct {
	name  string
	count bool
}{
	{GraphEnv, false}, {ProfileEnv, false}, {SyncEnv, false}, {SplitKEnv, false},
	{BiasCopiesEnv, false}, {PatchConvEnv, false}, {Winograd2Env, false},
	{RowGroupEnv, true}, {LightItemsEnv, true}, {HiddenBlockEnv, true}, {ClientBatchEnv, true}, {DirectDWRowsEnv, true},
}

// EnvSettings reads the variables of environ (os.Environ's NAME=VALUE form) that start with
// EnvPrefix as NewOps does: set lists those that change an option (NAME=VALUE, in environ's
// order), problems says of each other one why it changes nothing (a name the backend does not
// read, a switch whose value is not 1, a count that is not a positive integer, or
// FEDAUDIT_CUDA_DWROWS other than 2 or 4); an empty value, or 0 for a switch, is the default
// and neither. A misspelt option, or
// FEDAUDIT_CUDA_PATCHCONV=true, would otherwise be ignored without a word, and a benchmark
// timed without the option it was meant to time. An option that another one set beside it
// overrides (FEDAUDIT_CUDA_WINOGRAD2=1 beside FEDAUDIT_CUDA_PATCHCONV=1) is a problem too.
func EnvSettings(environ []string) (set, problems []string) {
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		i := envIndex(name)
		switch {
		case i < 0 && retiredEnv[name] != "":
			problems = append(problems, "environment variable "+name+" is no longer read: "+retiredEnv[name])
		case i < 0:
			problems = append(problems, "environment variable "+name+" is not an option of the GPU backend (it reads "+envNames()+")")
		case value == "" || (!tuningEnv[i].count && value == "0"):
		case tuningEnv[i].count:
			if n, err := strconv.Atoi(value); err != nil || n <= 0 {
				problems = append(problems, kv+": not a positive integer, so the default holds")
			} else if name == DirectDWRowsEnv && n != 2 && n != 4 {
				problems = append(problems, kv+": only 2 and 4 choose a weight gradient kernel, so the default holds")
			} else {
				set = append(set, kv)
			}
		case value == "1":
			set = append(set, kv)
		default:
			problems = append(problems, kv+": the option is on only with the value 1, so it stays off")
		}
	}
	if slices.Contains(set, PatchConvEnv+"=1") {
		// Every convolution runs by its patches: neither Winograd's form nor the direct
		// kernels' weight gradient is chosen.
		set = slices.DeleteFunc(set, func(kv string) bool {
			name, _, _ := strings.Cut(kv, "=")
			if name != Winograd2Env && name != DirectDWRowsEnv {
				return false
			}
			problems = append(problems, kv+" changes nothing beside "+PatchConvEnv+"=1: every convolution runs by its patches")
			return true
		})
	}
	return set, problems
}

// retiredEnv are the variables of options that became the default, each with what to do now.
var retiredEnv = map[string]string{
	"FEDAUDIT_CUDA_WINOGRAD":   "Winograd's F(4x4, 3x3) is the default for the convolutions it fits; " + PatchConvEnv + "=1 computes them by patches",
	"FEDAUDIT_CUDA_WINOGRAD4":  "Winograd's F(4x4, 3x3) is the default for the convolutions it fits; " + Winograd2Env + "=1 computes them by F(2x2, 3x3)",
	"FEDAUDIT_CUDA_DIRECTCONV": "the direct kernels are the default for the small convolutions they fit; " + PatchConvEnv + "=1 computes them by patches",
}

func envIndex(name string) int {
	for i, e := range tuningEnv {
		if e.name == name {
			return i
		}
	}
	return -1
}

func envNames() string {
	names := make([]string, len(tuningEnv))
	for i, e := range tuningEnv {
		names[i] = e.name
	}
	return strings.Join(names, ", ")
}
