package attacks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/model"
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

// Why an attack does not apply to a model's structure.
const (
	whyNotLastDense  = "label reconstruction reads the update of the last dense layer, and the model does not end in a dense layer"
	whyNotFirstDense = "analytic inversion reads the update of a dense first layer (a sequential spec starting with flatten and dense), and the model's first layer with parameters is not dense"
)

// ModelSkipped lists, in canonical order, the attacks that cannot run on models of config mc
// whatever the run file holds, each with why. On a CNN: those needing a dense first layer
// (analytic inversion) when it starts with a convolution (lenet5, resnet, most sequential
// specs), and those needing a dense last layer on a sequential spec that ends otherwise; every
// other attack runs on every known model (the host evaluates CNNs in float64,
// attacks/hostmodel/cnn.go).
// A model of kind external (runs imported with an architecture fedaudit does not know) has no
// model to evaluate at all: the attacks left are those that read parameters or updates as
// vectors (param-lda, param-cosine, upload-lda) and, where the import recorded them, the
// statistic columns. The experiment leaves the skipped attacks out of its selection with that
// reason rather than failing.
func ModelSkipped(mc model.Config) []Skip {
	if mc.Kind == model.External {
		const why = "it evaluates the model, and the architecture of an external model is unknown (the parameter-space attacks param-lda, param-cosine and upload-lda need none)"
		var out []Skip
		for _, a := range registry {
			if info := a.Info(); info.Needs.Model || info.Needs.Classes {
				out = append(out, Skip{Name: info.Name, Why: why})
			}
		}
		return out
	}
	if mc.Kind == "quadratic" {
		// Its loss a/2 |w|^2 - <b, w> has no classes: the label and inversion attacks failed
		// the attack stage (exit 1) after training, the default selection included.
		var out []Skip
		for _, a := range registry {
			if info := a.Info(); info.Needs.Classes {
				out = append(out, Skip{Name: info.Name, Why: "it needs a model with a softmax over classes, and the quadratic model has none"})
			}
		}
		return out
	}
	if !model.IsNNKind(mc.Kind) {
		return nil
	}
	firstDense, lastDense := convStructure(mc)
	var out []Skip
	for _, a := range registry {
		info := a.Info()
		switch {
		case info.Needs.FirstDense && !firstDense:
			out = append(out, Skip{Name: info.Name, Why: whyNotFirstDense + " (model " + mc.Kind + ")"})
		case info.Needs.LastDense && !lastDense:
			out = append(out, Skip{Name: info.Name, Why: whyNotLastDense + " (model " + mc.Kind + ")"})
		}
	}
	return out
}

// convStructure says whether a CNN config's first layer with parameters is dense on the raw
// input (only flatten layers before it) and whether its last layer is dense: lenet5 and resnet
// start with a convolution and end in a dense layer; a sequential spec is read from its layers.
func convStructure(mc model.Config) (firstDense, lastDense bool) {
	if mc.Kind != "sequential" {
		return false, true
	}
	kinds := make([]string, len(mc.Layers))
	for i, l := range mc.Layers {
		kinds[i] = strings.ToLower(l.Kind)
	}
	if i := slices.IndexFunc(kinds, func(k string) bool { return k != "flatten" }); i >= 0 {
		firstDense = kinds[i] == "dense"
	}
	return firstDense, len(kinds) > 0 && kinds[len(kinds)-1] == "dense"
}

// ConstantScores lists, in canonical order, the attacks whose score is the same in every run
// for this target pair, each with why: a score that compares a reconstruction or a label with
// those of epsilon and epsilon' is 0 in every run of both worlds when the two agree in what it
// compares (a relabel canary keeps the features; a canary may share the target's label). Such
// a row certifies nothing whatever the deployment, and in the default selection it would only
// take a share of the family's confidence (the noise sweep's relabel canary gave 8 such rows
// of 56). The rule depends on the samples alone, never on the scores, so leaving these rows
// out keeps every certificate valid. Nothing is listed where C' lacks the sample.
func ConstantScores(target, targetPrime datasets.Sample) []Skip {
	if !target.Present() || !targetPrime.Present() {
		return nil
	}
	var out []Skip
	for _, a := range registry {
		name := a.Info().Name
		switch {
		case (name == "inversion" || name == "invgrad") && slices.Equal(target.Features, targetPrime.Features):
			out = append(out, Skip{Name: name, Why: "its score compares the reconstruction with epsilon and epsilon', which have the same features (a relabel canary): 0 in every run; ask for it by name for its reconstruction measures"})
		case name == "label" && target.Label == targetPrime.Label:
			out = append(out, Skip{Name: name, Why: fmt.Sprintf("its score compares the update at the labels of epsilon and epsilon', which are the same (%d): 0 in every run; ask for it by name for its label measures", target.Label)})
		}
	}
	return out
}

// MinPairs is the fewest coupled pairs the named attack can score: a learned attack is fitted on
// the shadow pairs (every DefaultShadowEvery-th pair by pair id, never scored), and its fit needs
// two runs of each world, so two shadow pairs; every other attack scores one pair. Unknown names
// give 1.
func MinPairs(name string) int {
	if a, err := Lookup(name); err == nil && a.Info().Learned {
		return 2 * DefaultShadowEvery
	}
	return 1
}

// TooFewPairs lists, in the order given, the named attacks that cannot score an experiment of
// the given number of pairs (MinPairs), each with why.
func TooFewPairs(names []string, pairs int) []Skip {
	var out []Skip
	for _, n := range names {
		if need := MinPairs(n); pairs < need {
			out = append(out, Skip{Name: n, Why: fmt.Sprintf("a learned attack is fitted on every %dth pair (shadow pairs, never scored) and needs two of them: at least %d pairs, and there are %d",
				DefaultShadowEvery, need, pairs)})
		}
	}
	return out
}
