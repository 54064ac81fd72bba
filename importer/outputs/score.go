package outputs

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/attacks"
	"github.com/fedaudit/fedaudit/runs"
)

// maxInputBytes bounds the input file read into memory.
const maxInputBytes = 4 << 30

// ReadFile reads an outputs table, telling the format by content: Parquet ("PAR1"), an Arrow
// IPC file ("ARROW1") or stream (a 0xFFFFFFFF continuation marker), otherwise CSV.
func ReadFile(ctx context.Context, path string) (*Table, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, inputErrorf("%s is a directory, want a CSV, Parquet or Arrow file", path)
	}
	if st.Size() > maxInputBytes {
		return nil, inputErrorf("%s: %d bytes, more than %d", path, st.Size(), maxInputBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Read(ctx, data)
}

// Read reads an outputs table from its bytes, telling the format by content.
func Read(ctx context.Context, data []byte) (*Table, error) {
	switch {
	case bytes.HasPrefix(data, []byte("PAR1")):
		return ReadParquet(ctx, data)
	case bytes.HasPrefix(data, []byte("ARROW1")), bytes.HasPrefix(data, []byte{0xff, 0xff, 0xff, 0xff}):
		return ReadArrow(data)
	}
	return ReadCSV(bytes.NewReader(data))
}

// Options tune the scoring.
type Options struct {
	// ShadowEvery and ShadowMax choose LiRA's shadow pairs as attacks.Env does (0: defaults):
	// every k-th pair in order of pair id fits the Gaussians and is not audited by LiRA.
	ShadowEvery, ShadowMax int
}

// Skip is an attack that did not run, and why.
type Skip struct {
	Attack string `json:"attack"`
	Why    string `json:"why"`
}

// Result is what Score computed.
type Result struct {
	Scores []runs.Score `json:"-"`
	// Ran lists the attacks scored, Skipped the others with the reason.
	Ran     []string `json:"attacks"`
	Skipped []Skip   `json:"skipped"`
	Pairs   int      `json:"pairs"`
	Rounds  []int32  `json:"rounds"`
	// Shadow is the number of pairs LiRA was fitted on (and does not score).
	Shadow int `json:"shadow_pairs"`
	// References is the number of reference records per run (0: scores are uncalibrated).
	References int    `json:"reference_records"`
	Classes    int    `json:"classes"`
	Format     string `json:"format"`
}

// run is one model's outputs at one round: its canary and its reference records.
type run struct {
	id     int64
	pair   int64
	world  int8
	round  int32
	canary *Record
	refs   []*Record
	refRow map[string]int // a reference record's row, by name (Check)
}

// features holds one run's per-attack statistics, all higher for world C.
type features struct {
	loss, margin, lira float64
}

// Check groups the records into runs and checks the pairing: each (pair, round) has exactly
// one canary row per world, run ids (if given) are consistent, and reference records are given
// for all runs or none, the same number for each.
func Check(t *Table) ([]*run, error) {
	var p problems
	type key struct {
		pair  int64
		world int8
		round int32
	}
	byKey := map[key]*run{}
	var order []key
	runOf := map[int64]key{}
	pairRun := map[[2]int64]int64{} // (pair, world) -> run id
	for i := range t.Records {
		r := &t.Records[i]
		k := key{r.Pair, r.World, r.Round}
		ru := byKey[k]
		if ru == nil {
			ru = &run{pair: r.Pair, world: r.World, round: r.Round, id: 2*r.Pair + int64(r.World)}
			byKey[k] = ru
			order = append(order, k)
		}
		if r.HasRun {
			pw := [2]int64{r.Pair, int64(r.World)}
			if prev, ok := pairRun[pw]; ok && prev != r.Run {
				p.add("row %d, column run_id: run %d for pair %d world %s, earlier rows give run %d", r.Row, r.Run, r.Pair, worldName(r.World), prev)
			}
			pairRun[pw] = r.Run
			if prev, ok := runOf[r.Run]; ok && (prev.pair != r.Pair || prev.world != r.World) {
				p.add("row %d, column run_id: run %d is pair %d world %s here and pair %d world %s in an earlier row", r.Row, r.Run, r.Pair, worldName(r.World), prev.pair, worldName(prev.world))
			}
			runOf[r.Run] = k
			ru.id = r.Run
		}
		if !r.Canary {
			if ru.refRow == nil {
				ru.refRow = map[string]int{}
			}
			if prev, dup := ru.refRow[r.Name]; dup {
				p.add("row %d: reference record %q of pair %d world %s round %d given twice (also row %d)", r.Row, r.Name, r.Pair, worldName(r.World), r.Round, prev)
				continue
			}
			ru.refRow[r.Name] = r.Row
			ru.refs = append(ru.refs, r)
			continue
		}
		if ru.canary != nil {
			p.add("row %d: duplicated: rows %d and %d both give the canary of pair %d world %s round %d", r.Row, ru.canary.Row, r.Row, r.Pair, worldName(r.World), r.Round)
			continue
		}
		ru.canary = r
	}
	refs := -1
	var refNames []string // the first run's reference records, sorted
	for _, k := range order {
		ru := byKey[k]
		names := make([]string, len(ru.refs))
		for i, r := range ru.refs {
			names[i] = r.Name
		}
		slices.Sort(names)
		if ru.canary == nil {
			p.add("pair %d world %s round %d: reference records but no canary row (record = canary)", k.pair, worldName(k.world), k.round)
		}
		other := byKey[key{k.pair, 1 - k.world, k.round}]
		if other == nil {
			p.add("pair %d round %d: missing world %s (row %d has world %s); every pair needs both worlds", k.pair, k.round, worldName(1-k.world), firstRow(ru), worldName(k.world))
		}
		switch {
		case refs < 0:
			refs, refNames = len(ru.refs), names
		case len(ru.refs) != refs:
			p.add("pair %d world %s round %d: %d reference records, other runs have %d; calibration needs the same records in every run", k.pair, worldName(k.world), k.round, len(ru.refs), refs)
		case !slices.Equal(names, refNames):
			// As many, but others: runs calibrated on other records are shifted apart by them.
			p.add("pair %d world %s round %d: reference records %s, the first run (pair %d world %s round %d) has %s; calibration needs the same records in every run",
				k.pair, worldName(k.world), k.round, quoteNames(names), order[0].pair, worldName(order[0].world), order[0].round, quoteNames(refNames))
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	out := make([]*run, 0, len(order))
	for _, k := range order {
		out = append(out, byKey[k])
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.round != b.round {
			return a.round < b.round
		}
		if a.pair != b.pair {
			return a.pair < b.pair
		}
		return a.world < b.world
	})
	return out, nil
}

// quoteNames lists record names for messages: the first few, quoted, and a count of the rest.
func quoteNames(names []string) string {
	const shown = 5
	q := make([]string, 0, shown+1)
	for i, n := range names {
		if i == shown {
			q = append(q, fmt.Sprintf("and %d more", len(names)-shown))
			break
		}
		q = append(q, strconv.Quote(n))
	}
	return strings.Join(q, ", ")
}

func firstRow(r *run) int {
	if r.canary != nil {
		return r.canary.Row
	}
	return r.refs[0].Row
}

func worldName(w int8) string {
	if w == runs.WorldC {
		return "C"
	}
	return "C'"
}

// crossEntropy is -log softmax(z)_y, computed stably.
func crossEntropy(z []float64, y int) float64 {
	return logSumExp(z, -1) - z[y]
}

// logSumExp is log sum_j exp(z_j) over j != skip.
func logSumExp(z []float64, skip int) float64 {
	m := math.Inf(-1)
	for j, v := range z {
		if j != skip && v > m {
			m = v
		}
	}
	var s float64
	for j, v := range z {
		if j != skip {
			s += math.Exp(v - m)
		}
	}
	return m + math.Log(s)
}

// margin is z_y - max_{j != y} z_j, the margin attack's statistic (as attacks' margin of a
// softmax model).
func margin(z []float64, y int) float64 {
	m := math.Inf(-1)
	for j, v := range z {
		if j != y && v > m {
			m = v
		}
	}
	return z[y] - m
}

// recordFeatures computes one record's statistics: -loss (the given loss, else the
// cross-entropy of the logits), the margin (NaN without logits), and LiRA's statistic: the
// logit-scaled confidence z_y - log sum_{j != y} exp(z_j) with logits, -loss without (the loss
// is then taken as given, not assumed to be a cross-entropy).
func recordFeatures(r *Record, hasLoss bool) features {
	f := features{margin: math.NaN()}
	loss := r.Loss
	if !hasLoss {
		loss = crossEntropy(r.Logits, r.Label)
	}
	f.loss = -loss
	f.lira = -loss
	if r.Logits != nil {
		f.margin = margin(r.Logits, r.Label)
		f.lira = r.Logits[r.Label] - logSumExp(r.Logits, r.Label)
	}
	return f
}

// runFeatures is the canary's statistics minus the mean of the reference records': the
// calibration removes what moves all records of a model together (how well it trained, its
// noise along shared directions).
func runFeatures(ru *run, hasLoss bool) features {
	f := recordFeatures(ru.canary, hasLoss)
	if len(ru.refs) == 0 {
		return f
	}
	var m features
	for _, r := range ru.refs {
		g := recordFeatures(r, hasLoss)
		m.loss += g.loss
		m.margin += g.margin
		m.lira += g.lira
	}
	n := float64(len(ru.refs))
	return features{loss: f.loss - m.loss/n, margin: f.margin - m.margin/n, lira: f.lira - m.lira/n}
}

// Score checks the table and computes the scores of every attack it supports: loss always,
// margin with logits, LiRA offline and online when there are enough shadow pairs.
func Score(ctx context.Context, t *Table, opts Options) (*Result, error) {
	rs, err := Check(t)
	if err != nil {
		return nil, err
	}
	res := &Result{Classes: t.Classes, Format: t.Format}
	if len(rs) > 0 {
		res.References = len(rs[0].refs)
	}
	feats := make([]features, len(rs))
	pairSet := map[int64]bool{}
	for i, ru := range rs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		feats[i] = runFeatures(ru, t.HasLoss)
		pairSet[ru.pair] = true
		if n := len(res.Rounds); n == 0 || res.Rounds[n-1] != ru.round {
			res.Rounds = append(res.Rounds, ru.round)
		}
	}
	ids := make([]int64, 0, len(pairSet))
	for id := range pairSet {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	res.Pairs = len(ids)
	if res.Pairs < 2 {
		return nil, inputErrorf("%d pair; an audit needs at least 2 pairs (and hundreds to certify much)", res.Pairs)
	}
	emit := func(name string, score func(i int) float64, keep func(i int) bool) {
		for i, ru := range rs {
			if keep != nil && !keep(i) {
				continue
			}
			s := score(i)
			if math.IsNaN(s) || math.IsInf(s, 0) {
				s = 0 // a non-finite statistic tells nothing; the score file refuses NaN
			}
			res.Scores = append(res.Scores, runs.Score{RunID: ru.id, PairID: ru.pair, World: ru.world, Round: ru.round,
				Attack: name, Threat: runs.ThreatFinal, Score: s})
		}
	}
	emit("loss", func(i int) float64 { return feats[i].loss }, nil)
	res.Ran = append(res.Ran, "loss")
	if t.Classes > 0 {
		emit("margin", func(i int) float64 { return feats[i].margin }, nil)
		res.Ran = append(res.Ran, "margin")
	} else {
		res.Skipped = append(res.Skipped, Skip{"margin", "needs logits and a label; the table has only losses"})
	}
	if err := lira(res, rs, feats, ids, opts, emit); err != nil {
		return nil, err
	}
	res.Skipped = append(res.Skipped, Skip{"grad-align, linear, inversion, informed-*, upload attacks",
		"need the model's parameters, its uploads or the trainer's statistics; outputs give a black-box view"})
	return res, nil
}

// lira fits LiRA offline and online per round on the shadow pairs and scores the other pairs.
func lira(res *Result, rs []*run, feats []features, ids []int64, opts Options,
	emit func(string, func(int) float64, func(int) bool)) error {
	shadow, err := attacks.ShadowPairs(ids, opts.ShadowEvery, opts.ShadowMax)
	if err != nil {
		return inputErrorf("%v", err)
	}
	res.Shadow = len(shadow)
	if len(shadow) < 2 || len(shadow) == len(ids) {
		k := opts.ShadowEvery
		if k <= 0 {
			k = attacks.DefaultShadowEvery
		}
		why := fmt.Sprintf("fitted on shadow pairs (every %d-th pair), and %d pairs give %d; at least 2 are needed, and pairs left to audit", k, len(ids), len(shadow))
		res.Skipped = append(res.Skipped, Skip{"lira-offline", why}, Skip{"lira-online", why})
		return nil
	}
	for _, online := range []bool{false, true} {
		name := "lira-offline"
		if online {
			name = "lira-online"
		}
		scorer := map[int32]func(float64) float64{}
		for _, t := range res.Rounds {
			var in, out []float64
			for i, ru := range rs {
				if ru.round != t || !shadow[ru.pair] {
					continue
				}
				if ru.world == runs.WorldC {
					in = append(in, feats[i].lira)
				} else {
					out = append(out, feats[i].lira)
				}
			}
			f, err := attacks.FitLiRA(online, in, out)
			if err != nil {
				return fmt.Errorf("%s at round %d: fit on %d shadow pairs: %w", name, t, len(in), err)
			}
			scorer[t] = f
		}
		emit(name, func(i int) float64 { return scorer[rs[i].round](feats[i].lira) },
			func(i int) bool { return !shadow[rs[i].pair] })
		res.Ran = append(res.Ran, name)
	}
	return nil
}
