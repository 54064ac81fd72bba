package attacks

import "github.com/fedaudit/fedaudit/runs"

// Skip is an attack that cannot run on a run file, and why.
type Skip struct {
	Name, Why string
}

// Skipped lists, in canonical order, the attacks a run file cannot support by its columns, each
// with what the file lacks: the complement of Default, for telling a user why an attack did not
// run (e.g. runs imported from another trainer carry no informed statistics).
func Skipped(meta runs.Meta) []Skip {
	var out []Skip
	for _, a := range registry {
		info := a.Info()
		if why := fileLacks(info.Needs, meta); why != "" {
			out = append(out, Skip{Name: info.Name, Why: why})
		}
	}
	return out
}
