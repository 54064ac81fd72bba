package spec

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train/model"
)

// Refuse before work, never fail after it: what the stages after training need of a config is
// checked with it, before any run is trained, so that a mistake costs seconds, not the training.

// MaxClientSteps is the most local training steps one experiment may ask for, counted as Plan
// counts them (Work.ClientSteps: 2 runs per pair, every round, every client's local training
// plus the informed adversary's, every local step). Small models cost the engine a fixed
// overhead per step whatever their FLOPs: `audit demo` trains about 10^5 steps a second on two
// cores, so 10^11 steps are twelve days there, and the largest reference experiment in results/
// asks for 1.2 x 10^7. A larger number is a typo (rounds: 1000000000), not an audit.
const MaxClientSteps = 1e11

// clientSteps is Plan's count of local steps of cfg (Work.ClientSteps), from the config alone,
// in float64 so that absurd configs cannot overflow it.
func clientSteps(cfg *Config) float64 {
	trainings := float64(cfg.Data.Clients)
	if cfg.Train.Informed {
		trainings++
	}
	return 2 * float64(cfg.Pairs) * float64(cfg.Train.Rounds) * trainings * float64(cfg.Train.LocalSteps)
}

// validateStages checks what the config asks of the stages after training that the config
// alone decides: the attack names, the pairs the learned attacks are fitted on, the canaries a
// one-run audit needs, and the size of the whole job. Validate reports them with the rest.
func (c *Config) validateStages() []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	seen := map[string]bool{}
	var known []string
	for _, n := range c.Audit.Attacks {
		if _, err := attacks.Lookup(n); err != nil && !attacks.IsCanaryAttack(n) {
			if known == nil {
				for _, info := range attacks.Names() {
					known = append(known, info.Name)
				}
				known = append(known, attacks.CanaryAttackNames()...)
			}
			bad("audit.attacks", "unknown attack %q (have %s)", n, strings.Join(known, ", "))
			continue
		}
		if seen[n] {
			bad("audit.attacks", "%s is listed twice", n)
		}
		seen[n] = true
	}
	if c.Audit.Method != MethodOneRun && c.Pairs >= 1 {
		for _, s := range attacks.TooFewPairs(c.Audit.Attacks, c.Pairs) {
			bad("audit.attacks", "%s: %s; raise pairs to %d or leave it out", s.Name, s.Why, attacks.MinPairs(s.Name))
		}
	}
	if cc := c.Train.Canaries; cc != nil && cc.Count >= 1 && c.Pairs >= 1 && cc.Count*c.Pairs < 2 {
		bad("train.canaries.count", "a one-run audit guesses the inclusion of at least one canary in and one out of the world-C runs of all pairs: count x pairs must be at least 2, got %d x %d", cc.Count, c.Pairs)
	}
	if c.Train.Rounds > math.MaxInt32 {
		bad("train.rounds", "need at most %d (run files record rounds as 32-bit integers), got %d", math.MaxInt32, c.Train.Rounds)
	}
	if c.Pairs >= 1 && c.Pairs <= MaxPairs && c.Train.Rounds >= 1 && c.Data.Clients >= 1 && c.Train.LocalSteps >= 1 {
		if n := clientSteps(c); n > MaxClientSteps {
			trainings := c.Data.Clients
			if c.Train.Informed {
				trainings++
			}
			bad("train.rounds", "%d rounds of %d pairs (2 runs each) with %d local trainings of %d steps a round are %.3g local steps, above the most one experiment may ask (%.0e); fewer rounds or pairs",
				c.Train.Rounds, c.Pairs, trainings, c.Train.LocalSteps, n, MaxClientSteps)
		}
	}
	return errs
}

// PlannedMeta is the run-file metadata, columns only (no config, hash or shard), that training
// cfg writes (TrainShard's recorder: the trainer's statistics, then the target sample's).
func PlannedMeta(cfg *Config) runs.Meta {
	m := runs.Meta{HasParams: cfg.Train.RecordParams, HasUpload: cfg.Train.RecordUpload}
	m.StatNames = append(slices.Clone(cfg.Train.InformedStatNames()),
		runs.StatTargetLossC, runs.StatTargetLossCPrime, runs.StatTargetMarginC, runs.StatTargetMarginCPrime)
	if cc := cfg.Train.Canaries; cc != nil {
		m.Canaries = cc.Count
		m.CanaryStatNames = cc.StatNames()
	}
	return m
}

// RunAttacks resolves the run-level attacks the attack stage scores: the listed ones (the
// canary attacks among them are scored apart), else every attack the run files support (meta)
// but, from that default only, the learned attacks the pairs are too few to fit; either way
// without the attacks the model cannot serve. skipped says why default attacks were left out
// for the pairs.
func RunAttacks(listed []string, meta runs.Meta, mc model.Config, pairs int) (names []string, skipped []attacks.Skip) {
	names = slices.DeleteFunc(slices.Clone(listed), attacks.IsCanaryAttack)
	if len(names) == 0 && len(listed) > 0 {
		return nil, nil // only canary attacks were asked for
	}
	if len(names) == 0 {
		names = attacks.Default(meta)
		skipped = attacks.TooFewPairs(names, pairs)
		names = slices.DeleteFunc(names, func(n string) bool {
			return slices.ContainsFunc(skipped, func(s attacks.Skip) bool { return s.Name == n })
		})
	}
	for _, s := range attacks.ModelSkipped(mc) {
		names = slices.DeleteFunc(names, func(n string) bool { return n == s.Name })
	}
	return names, skipped
}

// AuditedRounds is how many rounds the attacks score: audit.rounds, or every checkpoint after
// round 0.
func AuditedRounds(cfg *Config) int {
	if len(cfg.Audit.Rounds) > 0 {
		return len(cfg.Audit.Rounds)
	}
	n := 0
	for _, c := range cfg.Train.Checkpoints {
		if c > 0 {
			n++
		}
	}
	return n
}

// PlannedRows is the number of rows an analysis of cfg's runs certifies, the family its
// Bonferroni correction divides the error level among (audit.FamilyRowConfidence): each
// run-level attack RunAttacks resolves and each canary attack, at every audited round
// (audit.rounds, else every checkpoint after 0). It may count a row the attack stage then
// leaves out (a default upload attack at a round without the checkpoint before it): more rows
// make a stricter row confidence, the side a plan of the pairs needed should err on.
func PlannedRows(cfg *Config) int {
	meta := PlannedMeta(cfg)
	rounds := AuditedRounds(cfg)
	var names []string
	if cfg.Audit.Method != MethodOneRun {
		names, _ = RunAttacks(cfg.Audit.Attacks, meta, cfg.Train.Model, cfg.Pairs)
	}
	canary := 0
	if meta.Canaries > 0 {
		for _, n := range cfg.Audit.Attacks {
			if attacks.IsCanaryAttack(n) {
				canary++
			}
		}
		if canary == 0 {
			canary = len(attacks.CanaryDefault(meta))
		}
	}
	return (len(names) + canary) * rounds
}

// CheckStages refuses, with a *ConfigError naming the field, a config whose attack stage would
// fail on the runs its training records: no checkpoint after round 0 to attack (none at all,
// or round 0 alone), listed attacks the run files will not support, canary attacks without
// canaries of their kind, attacks that read w_0 without round 0 among the checkpoints, upload
// attacks at a round T without the checkpoint T-1, and attacked rounds that are no
// checkpoints. The commands that train (run, demo, train) and plan call it before
// anything is trained or written, and TrainShards before it trains.
func CheckStages(cfg *Config) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	// Adjacencies the trainer refuses when it starts (a config accepts them for the data
	// export, where another trainer may train them).
	switch cfg.Adjacency.Kind {
	case "add", "remove":
		bad("adjacency.kind", "%s changes client %d's number of samples between C and C', and the trainer runs both worlds' replicas side by side with equal counts: train sample-level adjacency as replace (the canary in place of one sample); %s can be exported for another trainer (audit datasets export)",
			cfg.Adjacency.Kind, cfg.Adjacency.Client, cfg.Adjacency.Kind)
	case "remove-client":
		if !cfg.Train.IsClientDP() {
			bad("adjacency.kind", "remove-client needs the DP-FedAvg family (server-side noise), not %q: a removed Noisy-FedAvg client would also remove its own noise", cfg.Train.Algorithm)
		}
	}
	if slices.Contains(cfg.Audit.Attacks, "grad-canary") && cfg.Train.GradientCanary == nil && cfg.Train.CraftedUpdate == nil {
		bad("audit.attacks", "grad-canary projects the final model on a gradient canary's or a crafted update's direction, and the runs have none: set adjacency kind gradient, or adjacency.crafted_update with kind remove-client")
	}
	meta := PlannedMeta(cfg)
	cps := cfg.Train.Checkpoints
	// The attacks score models trained for at least one round: a run file records the models
	// at the checkpoints only, and w_0 is no audit of the training. Without a checkpoint after
	// round 0 every shard would train to its end and then record nothing (no checkpoint at
	// all) or nothing to score (round 0 alone).
	if !slices.ContainsFunc(cps, func(t int) bool { return t >= 1 }) {
		final := "train.rounds for the final model"
		if cfg.Train.Rounds >= 1 {
			final = fmt.Sprintf("%d for the final model", cfg.Train.Rounds)
		}
		if len(cps) == 0 {
			bad("train.checkpoints", "none listed, and training records the models only at the checkpoints: list the rounds to audit (e.g. %s)", final)
		} else {
			bad("train.checkpoints", "%v lists no round after 0, and the attacks score the models of rounds 1 and later: add the rounds to audit (e.g. %s)", cps, final)
		}
	}
	rounds := cfg.Audit.Rounds
	for _, t := range rounds {
		if t < 1 || !slices.Contains(cps, t) {
			bad("audit.rounds", "round %d is not among the checkpoints after round 0 (train.checkpoints %v)", t, cps)
		}
	}
	if len(rounds) == 0 {
		rounds = slices.DeleteFunc(slices.Clone(cps), func(t int) bool { return t < 1 })
	}

	var canary []string
	for _, n := range cfg.Audit.Attacks {
		if attacks.IsCanaryAttack(n) {
			canary = append(canary, n)
		}
	}
	if len(canary) > 0 {
		supported := attacks.CanaryDefault(meta)
		for _, n := range canary {
			switch {
			case meta.Canaries == 0:
				bad("audit.attacks", "%s scores canaries, and the runs carry none: set train.canaries", n)
			case !slices.Contains(supported, n):
				bad("audit.attacks", "%s does not apply to canaries of kind %q (these support %s)", n, cfg.Train.Canaries.Kind, strings.Join(supported, ", "))
			}
		}
	}

	if cfg.Audit.Method != MethodOneRun {
		checkAttackNeeds(cfg, meta, rounds, bad)
	}
	if len(errs) > 0 {
		return &ConfigError{Err: errors.Join(errs...)}
	}
	return nil
}

// checkAttackNeeds checks the attacks the config scores, with run files of metadata meta (what
// training will record, or what an import writes), against what they need: what the run files
// hold, the round-0 checkpoint for w_0, the checkpoint before each audited round for an upload,
// and a claim about a threat that some attack observes. rounds are the audited rounds.
func checkAttackNeeds(cfg *Config, meta runs.Meta, rounds []int, bad func(field, format string, a ...any)) {
	cps := cfg.Train.Checkpoints
	lacks := map[string]string{}
	for _, s := range attacks.Skipped(meta) {
		lacks[s.Name] = s.Why
	}
	names, _ := RunAttacks(cfg.Audit.Attacks, meta, cfg.Train.Model, cfg.Pairs)
	var fit, needW0, needPrev []string
	for _, n := range names {
		if why, ok := lacks[n]; ok {
			if importOnly(n) {
				bad("audit.attacks", "%s scores imported runs only (audit import replays its statistic from the imported iterates; training never records it): leave it out", n)
				continue
			}
			bad("audit.attacks", "%s: %s: record what it needs (train.record_params, train.record_upload, train.informed) or leave it out",
				n, strings.Replace(why, "the run file lacks", "the run files will lack", 1))
			continue
		}
		fit = append(fit, n)
	}
	if n, ok := claimUncovered(cfg, fit); ok {
		bad("audit.claim_about", "%s, but none of the attacks that will run (%s) observes the %s: the analysis would judge the claim on no row and give no verdict (exit 4), after training; list an attack of that threat model in audit.attacks%s, or state what the claim is about",
			n, strings.Join(fit, ", "), n, uploadsHint(n))
	}
	for _, n := range fit {
		a, _ := attacks.Lookup(n)
		needs := a.Info().Needs
		if needs.Initial && !slices.Contains(cps, 0) {
			needW0 = append(needW0, n)
		}
		if needs.Upload {
			needPrev = append(needPrev, n)
		}
	}
	if len(needW0) > 0 {
		bad("train.checkpoints", "the attacks %s read the initial model w_0 from the round-0 checkpoint: add 0 to train.checkpoints, or list audit.attacks without them",
			strings.Join(needW0, ", "))
	}
	if len(needPrev) > 0 {
		var missing []int
		for _, t := range rounds {
			if t >= 1 && !slices.Contains(cps, t-1) {
				missing = append(missing, t-1)
			}
		}
		if len(missing) > 0 {
			bad("train.checkpoints", "the upload attacks %s at round T read the model w_{T-1} the upload started from: add %v to train.checkpoints, or list audit.attacks without them",
				strings.Join(needPrev, ", "), missing)
		}
	}
}

// CheckImportedStages checks the attacks of an imported config against the run files the import
// writes (meta): an attack that needs w_0 without round 0 among the snapshots, or an upload
// without the round before, is refused before anything is written, as CheckStages refuses a
// training; the analysis of the imported directory failed on it (exit 1) after the import.
func CheckImportedStages(cfg *Config, meta runs.Meta) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	rounds := cfg.Audit.Rounds
	if len(rounds) == 0 {
		rounds = slices.DeleteFunc(slices.Clone(cfg.Train.Checkpoints), func(t int) bool { return t < 1 })
	}
	if cfg.Audit.Method != MethodOneRun {
		checkAttackNeeds(cfg, meta, rounds, bad)
	}
	if len(errs) > 0 {
		return &ConfigError{Err: errors.Join(errs...)}
	}
	return nil
}

// wholeNumbers reports every integer field of a YAML config written as a number with a
// fraction (pairs: 200.5), which the YAML decoder would truncate silently; a whole number
// written as a float (1e3) is accepted.
func wholeNumbers(raw []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil // the decoder reports it
	}
	var errs []error
	checkWhole(&doc, reflect.TypeOf(Config{}), "", &errs)
	return errors.Join(errs...)
}

var (
	yamlUnmarshaler = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	textUnmarshaler = reflect.TypeOf((*interface{ UnmarshalText([]byte) error })(nil)).Elem()
)

func checkWhole(n *yaml.Node, t reflect.Type, path string, errs *[]error) {
	if n == nil {
		return
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			checkWhole(c, t, path, errs)
		}
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
		if n == nil {
			return
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) {
				*errs = append(*errs, fmt.Errorf("%s: need a whole number, got %s (line %d)", path, n.Value, n.Line))
			}
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if f, ok := yamlField(t, key); ok {
				checkWhole(n.Content[i+1], f.Type, joinPath(path, key), errs)
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			checkWhole(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			checkWhole(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), errs)
		}
	}
}

// yamlField finds the field of struct type t that the YAML key names (its yaml tag, or the
// lower-cased field name as the decoder does).
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// importOnly reports whether attack name needs a statistic only audit import writes.
func importOnly(name string) bool {
	a, err := attacks.Lookup(name)
	return err == nil && slices.ContainsFunc(a.Info().Needs.Stats, runs.ImportOnly)
}

// claimUncovered reports what a stated claim is about (ClaimAboutModels or ClaimAboutUploads)
// when none of the pair attacks that will run observes it: the analysis would then judge every
// row against its theory bound and give no verdict on the claim. Canary attacks (their one-run
// rows) and configs without a stated claim are left to the analysis.
func claimUncovered(cfg *Config, fit []string) (string, bool) {
	a := cfg.Audit
	if a.ClaimMu == 0 && a.ClaimEpsilon == 0 || len(fit) == 0 || cfg.Train.Canaries != nil {
		return "", false
	}
	for _, n := range fit {
		if at, err := attacks.Lookup(n); err != nil || ClaimCovers(a.ClaimAbout, at.Info().Threat) {
			return "", false
		}
	}
	return cmp.Or(a.ClaimAbout, ClaimAboutModels), true
}

// ClaimCovers reports whether a claim about `about` (audit.claim_about: models, the default,
// or uploads) speaks of the rows of threat model threat; rows of no threat model (foreign
// scores) are about whatever the claim is.
func ClaimCovers(about, threat string) bool {
	switch {
	case threat == "":
		return true
	case about == ClaimAboutUploads:
		return threat == runs.ThreatUploads
	}
	return threat != runs.ThreatUploads
}

// uploadsHint names what an uploads attack needs recorded.
func uploadsHint(about string) string {
	if about == ClaimAboutUploads {
		return " (informed-upload with train.informed, or upload-lda with train.record_upload)"
	}
	return ""
}
