// Package outputs imports per-record model outputs (the loss, or the logits and label, of the
// canary record and optionally of reference records, for every run of N coupled pairs) as
// TF Privacy's membership-inference attack input does, and scores them with the black-box
// attacks that need nothing else: loss, margin and LiRA. It is the door for auditing a model
// of any architecture trained anywhere: only its outputs on a few records are needed.
//
// World C is the world whose training data held the canary (IN), C' the one that did not (OUT);
// every score is higher for C.
package outputs

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/runs"
)

// Record is one row of an outputs table: the outputs of one model (run) on one record.
type Record struct {
	Row    int // 1-based data row of the input, for messages
	Pair   int64
	Run    int64
	HasRun bool
	World  int8 // 0 = C (trained on the canary), 1 = C'
	Round  int32
	Canary bool    // false: a reference record, used to calibrate the run's scores
	Name   string  // a reference record's name (the record column); "" for the canary
	Loss   float64 // NaN when the table has no loss column
	Logits []float64
	Label  int // -1 without logits
}

// Table is an outputs table as read and checked.
type Table struct {
	Records []Record
	// Classes is the number of logits per row; 0 when the table has only losses.
	Classes int
	HasLoss bool
	// Format is "csv", "parquet" or "arrow".
	Format string
}

// column is one input column, whatever its storage: the readers adapt CSV cells and Arrow
// arrays to it. Each accessor reports whether the cell is present (not null or empty).
type column struct {
	name string
	num  func(i int) (float64, bool, error)
	str  func(i int) (string, bool, error)
	list func(i int) ([]float64, bool, error) // nil for scalar columns
}

// maxProblems caps how many problems one error lists.
const maxProblems = 20

// problems collects input problems, each naming its row and column.
type problems struct {
	list  []string
	extra int
}

func (p *problems) add(format string, args ...any) {
	if len(p.list) >= maxProblems {
		p.extra++
		return
	}
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	msg := strings.Join(p.list, "\n  ")
	if p.extra > 0 {
		msg += fmt.Sprintf("\n  ... and %d more", p.extra)
	}
	return &InputError{Msg: msg, N: len(p.list) + p.extra}
}

// InputError is a problem with the input table (as opposed to I/O): the CLI exits with usage
// status for it.
type InputError struct {
	Msg string
	N   int
}

func (e *InputError) Error() string {
	if e.N == 1 {
		return "outputs table: " + e.Msg
	}
	return fmt.Sprintf("outputs table: %d problems:\n  %s", e.N, e.Msg)
}

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...), N: 1}
}

// ParseWorld reads a world label as runs.ParseWorld does (C, c, 0: world C, trained on the
// canary; C', c', Cprime, cprime, C_prime, 1: world C'), and also 0.0 and 1.0 (a world column
// of floats as a CSV writer prints it).
func ParseWorld(s string) (int8, error) {
	switch strings.TrimSpace(s) {
	case "0.0":
		return runs.WorldC, nil
	case "1.0":
		return runs.WorldCPrime, nil
	}
	return runs.ParseWorld(s)
}

// maxLogits bounds the classes of a row so that a hostile file cannot ask for huge rows.
const maxLogits = 1 << 16

// maxOutput bounds a loss or logit's magnitude: the scores are differences of them (a record's
// statistic less the mean of its references), and LiRA fits their variances, sums of squares
// over up to 2^24 rows; beyond it those overflow to infinities. A loss of -1.8e308 gave the
// largest float64 as a score, which the analysis refused after the import had succeeded, and
// losses of 1e200 left both LiRA rows at AUC 0.5 without a word.
const maxOutput = 1e150

// build turns columns into records, checking every cell.
func build(cols []column, rows int, format string) (*Table, error) {
	var p problems
	cs := nameColumns(cols, &p)
	cs.checkShape(&p)
	if err := p.err(); err != nil {
		return nil, err
	}
	t := &Table{HasLoss: cs.loss != nil, Format: format, Classes: len(cs.logitCols)}
	t.Records = make([]Record, 0, rows)
	for i := 0; i < rows; i++ {
		if r, ok := cs.readRow(i, t, &p); ok {
			t.Records = append(t.Records, r)
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	if len(t.Records) == 0 {
		return nil, inputErrorf("no rows")
	}
	return t, nil
}

// columnSet is the outputs format's columns found by name in a table (nil where absent), so
// that the header is checked once and every row is read through the same columns.
type columnSet struct {
	pair, run, world, round, record, loss, label, logits *column
	logitCols                                            []*column
}

// hasLogits says whether the table gives logits, as one list column or as logit_0.. columns.
func (cs *columnSet) hasLogits() bool { return cs.logits != nil || len(cs.logitCols) > 0 }

// nameColumns finds the format's columns by name, reporting duplicates, synonyms given
// together and columns the format does not know; kept apart from the row loop so that header
// problems are all found before any cell is read.
func nameColumns(cols []column, p *problems) columnSet {
	byName := map[string]*column{}
	for i := range cols {
		c := &cols[i]
		// Matched as a score CSV's header is (without regard to case or surrounding space):
		// pandas' Pair_ID, World and Loss were refused as unknown columns.
		name := strings.ToLower(strings.TrimSpace(c.name))
		if _, dup := byName[name]; dup {
			p.add("column %q appears twice", name)
		}
		byName[name] = c
	}
	pick := func(names ...string) *column {
		var got *column
		for _, n := range names {
			if c, ok := byName[n]; ok {
				if got != nil {
					p.add("columns %q and %q both given; they mean the same", got.name, n)
				}
				got = c
			}
		}
		return got
	}
	var cs columnSet
	cs.pair = pick("pair_id", "pair")
	cs.run = pick("run_id", "run")
	cs.world = byName["world"]
	cs.round = byName["round"]
	cs.record = byName["record"]
	cs.loss = byName["loss"]
	cs.label = byName["label"]
	cs.logits = byName["logits"]
	for k := 0; ; k++ {
		c, ok := byName["logit_"+strconv.Itoa(k)]
		if !ok {
			break
		}
		cs.logitCols = append(cs.logitCols, c)
	}
	known := map[string]bool{"pair_id": true, "pair": true, "run_id": true, "run": true, "world": true,
		"round": true, "record": true, "loss": true, "label": true, "logits": true}
	for k := range cs.logitCols {
		known["logit_"+strconv.Itoa(k)] = true
	}
	var unknown []string
	for name := range byName {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, n := range unknown {
		p.add("column %q is not part of the outputs format (pair_id, run_id, world, round, record, loss, logits or logit_0.., label)", n)
	}
	return cs
}

// checkShape reports the first way the columns fail to make a table of outputs (a required
// column missing, logits without labels, ...): one message, the one a user fixes first.
func (cs *columnSet) checkShape(p *problems) {
	switch {
	case cs.pair == nil:
		p.add("missing column pair_id (the pair id of the run)")
	case cs.world == nil:
		p.add("missing column world (C or C', or 0 or 1)")
	case cs.logits != nil && len(cs.logitCols) > 0:
		p.add("give the logits as one list column logits or as columns logit_0.., not both")
	case cs.loss == nil && cs.logits == nil && len(cs.logitCols) == 0:
		p.add("no outputs: give a loss column, or logits (a list column logits or columns logit_0, logit_1, ..) with a label column")
	case cs.hasLogits() && cs.label == nil:
		p.add("logits without a label column: the margin and the confidence need the record's class")
	case cs.label != nil && cs.logits == nil && len(cs.logitCols) == 0:
		p.add("a label column without logits")
	case len(cs.logitCols) == 1:
		p.add("one logit column (logit_0): a classifier has at least 2 classes")
	case cs.logits != nil && cs.logits.list == nil:
		p.add("column logits is not a list column")
	}
}

// rowCheck reads the cells of one row, recording each problem with its row and column and
// whether the row had any, so that a bad row is reported in full and then dropped.
type rowCheck struct {
	i   int
	p   *problems
	bad bool
}

// fail records a problem with the row's cell in column col.
func (rc *rowCheck) fail(col, format string, args ...any) {
	rc.p.add("row %d, column %s: %s", rc.i+1, col, fmt.Sprintf(format, args...))
	rc.bad = true
}

// integer reads the row's cell of c as a whole number in [lo, hi].
func (rc *rowCheck) integer(c *column, lo, hi float64) (int64, bool) {
	v, ok, err := c.num(rc.i)
	switch {
	case err != nil:
		rc.fail(c.name, "%v", err)
	case !ok:
		rc.fail(c.name, "empty")
	case v != math.Trunc(v) || v < lo || v > hi:
		rc.fail(c.name, "%v is not an integer in [%g, %g]", v, lo, hi)
	default:
		return int64(v), true
	}
	return 0, false
}

// readRow reads row i into a record, checking every cell; ok is false when any cell was bad
// (the problems are in p). t.Classes is fixed by the first good row with logits.
func (cs *columnSet) readRow(i int, t *Table, p *problems) (Record, bool) {
	r := Record{Row: i + 1, Loss: math.NaN(), Label: -1, Canary: true}
	rc := &rowCheck{i: i, p: p}
	r.Pair, _ = rc.integer(cs.pair, 0, 1<<53)
	if cs.run != nil {
		r.Run, r.HasRun = rc.integer(cs.run, 0, 1<<53)
	}
	if cs.round != nil {
		v, _ := rc.integer(cs.round, 0, math.MaxInt32)
		r.Round = int32(v)
	}
	if s, ok, err := cs.world.str(i); err != nil || !ok {
		rc.fail("world", "empty or unreadable (%v)", err)
	} else if w, err := ParseWorld(s); err != nil {
		rc.fail("world", "%v", err)
	} else {
		r.World = w
	}
	if cs.record != nil {
		s, ok, err := cs.record.str(i)
		if err != nil {
			rc.fail("record", "%v", err)
		}
		s = strings.TrimSpace(s)
		r.Canary = !ok || s == "" || s == "canary"
		if !r.Canary {
			r.Name = s
		}
	}
	if cs.loss != nil {
		v, ok, err := cs.loss.num(i)
		switch {
		case err != nil:
			rc.fail("loss", "%v", err)
		case !ok:
			rc.fail("loss", "empty")
		case math.IsNaN(v) || math.IsInf(v, 0):
			rc.fail("loss", "%v (the model's output must be finite)", v)
		case math.Abs(v) > maxOutput:
			rc.fail("loss", "%v is beyond ±%g (the attacks take differences of losses and LiRA their variances, which would overflow)", v, maxOutput)
		}
		r.Loss = v
	}
	if cs.hasLogits() {
		cs.readLogits(rc, t, &r)
	}
	return r, !rc.bad
}

// readLogits reads the row's logits (from the list column or the logit_k columns) and its
// label into r, checking that they are finite, that their number matches the earlier rows'
// and that the label is one of the classes.
func (cs *columnSet) readLogits(rc *rowCheck, t *Table, r *Record) {
	i := rc.i
	var z []float64
	if cs.logits != nil {
		v, ok, err := cs.logits.list(i)
		switch {
		case err != nil:
			rc.fail("logits", "%v", err)
		case !ok:
			rc.fail("logits", "empty")
		case len(v) < 2 || len(v) > maxLogits:
			rc.fail("logits", "%d logits, want 2 to %d", len(v), maxLogits)
		}
		z = v
	} else {
		z = make([]float64, len(cs.logitCols))
		for k, c := range cs.logitCols {
			v, ok, err := c.num(i)
			if err != nil || !ok {
				rc.fail(c.name, "empty or unreadable (%v)", err)
			}
			z[k] = v
		}
	}
	for k, v := range z {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > maxOutput {
			col := "logits"
			if cs.logits == nil {
				col = cs.logitCols[k].name
			}
			rc.fail(col, "logit %d is %v (the model's output must be finite, within ±%g: the attacks take differences of logits and LiRA their variances, which would overflow)", k, v, maxOutput)
			break
		}
	}
	if !rc.bad {
		if t.Classes == 0 {
			t.Classes = len(z)
		} else if len(z) != t.Classes {
			rc.fail("logits", "%d logits, earlier rows have %d", len(z), t.Classes)
		}
	}
	r.Logits = z
	if v, ok := rc.integer(cs.label, -(1 << 53), 1<<53); ok {
		if v < 0 || (len(z) > 0 && v >= int64(len(z))) {
			rc.fail("label", "class %d out of range [0, %d) of the %d logits", v, len(z), len(z))
		} else {
			r.Label = int(v)
		}
	}
}

var errNotNumber = errors.New("not a number")
