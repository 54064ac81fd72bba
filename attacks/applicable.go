package attacks

import (
	"fmt"
	"slices"

	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
)

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

// convKinds are train's convolutional models (package nn), which the host model of the attacks
// does not evaluate yet.
var convKinds = []string{"lenet5", "resnet", "sequential"}

// ModelSkipped lists, in canonical order, the attacks that cannot run on models of kind mc
// whatever the run file holds, each with why: those that evaluate the model on the host (its
// gradients or class scores) when it is a convolutional model. The experiment leaves them out
// of its selection with that reason rather than failing; the loss, margin and informed attacks
// read recorded columns and run on every model.
//
// A model of kind external (runs imported with an architecture fedaudit does not know) has no
// model to evaluate at all: the attacks left are those that read parameters or updates as
// vectors (param-lda, param-cosine, upload-lda) and, where the import recorded them, the
// statistic columns.
func ModelSkipped(mc train.ModelConfig) []Skip {
	var why string
	switch {
	case mc.Kind == train.External:
		why = "it evaluates the model, and the architecture of an external model is unknown (the parameter-space attacks param-lda, param-cosine and upload-lda need none)"
	case slices.Contains(convKinds, mc.Kind):
		why = fmt.Sprintf("it evaluates the model on the host, which covers softmax, mlp and quadratic models; convolutional models (%s) are not supported by attacks yet", mc.Kind)
	default:
		return nil
	}
	var out []Skip
	for _, a := range registry {
		info := a.Info()
		if info.Needs.Model || info.Needs.Classes {
			out = append(out, Skip{Name: info.Name, Why: why})
		}
	}
	return out
}
