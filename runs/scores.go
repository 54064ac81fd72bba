package runs

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/fedaudit/fedaudit/internal/suggest"
	"github.com/fedaudit/fedaudit/runs/integrity"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Threat models: what the adversary of an attack observes.
const (
	ThreatFinal       = "final"        // the final global model
	ThreatAllIterates = "all-iterates" // every global model w_0 .. w_T
	ThreatUploads     = "uploads"      // the target client's noisy uploads
)

// ValidThreat reports whether t names a threat model; the empty string (unstated) is valid in
// score files of other tools.
func ValidThreat(t string) bool {
	return t == "" || t == ThreatFinal || t == ThreatAllIterates || t == ThreatUploads
}

func threatError(t string) error {
	return fmt.Errorf("threat %q: want %s, %s or %s (or empty)", t, ThreatFinal, ThreatAllIterates, ThreatUploads)
}

// ParseWorld reads a world as import manifests and score CSVs write it: C (also c, 0) or C'
// (also c', Cprime, cprime, C_prime, 1).
func ParseWorld(s string) (int8, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "c", "0":
		return WorldC, nil
	case "c'", "cprime", "c_prime", "1":
		return WorldCPrime, nil
	}
	return 0, fmt.Errorf("world %q: want C or C' (or 0 or 1)", s)
}

// DefaultAttack names the attack of scores read from a file without an attack column.
const DefaultAttack = "score"

// Names of the columns of a score file, in schema order.
const (
	colAttack = "attack"
	colThreat = "threat"
	colScore  = "score"
)

var fixedScoreColumns = []string{colRunID, colPairID, colWorld, colRound, colAttack, colThreat, colScore}

// Score is an attack's verdict on one run at one round. Higher Score means the attack believes
// more strongly that the run trained on world C.
type Score struct {
	RunID  int64
	PairID int64
	World  int8 // the true world: WorldC or WorldCPrime
	Round  int32
	Attack string
	Threat string // ThreatFinal, ThreatAllIterates or ThreatUploads for files we write
	Score  float64
	// Metrics is aligned with ScoreMeta.MetricNames.
	Metrics []float64
}

// ScoreMeta describes a score file.
type ScoreMeta struct {
	// Config is the experiment config (JSON) of the run files the scores came from; optional.
	Config      []byte
	DatasetHash string
	ToolVersion string
	// MetricNames names the extra float64 columns, in order.
	MetricNames []string
}

// ScoreFile is a score file as read: its metadata (empty for CSV and foreign Arrow files
// except MetricNames) and its scores.
type ScoreFile struct {
	Meta   ScoreMeta
	Scores []Score
	// Coupled is true when the file has a pair_id column: its scores come from coupled pairs of
	// runs whose two worlds may share randomness, so the worlds are not independent samples and
	// only methods valid for dependent worlds may certify them. Every score file fedaudit
	// writes is coupled.
	Coupled bool
}

func scoreSchema(m ScoreMeta) (*arrow.Schema, error) {
	config, err := compactConfig(m.Config, false)
	if err != nil {
		return nil, err
	}
	fields := []arrow.Field{
		{Name: colRunID, Type: arrow.PrimitiveTypes.Int64},
		{Name: colPairID, Type: arrow.PrimitiveTypes.Int64},
		{Name: colWorld, Type: arrow.PrimitiveTypes.Int8},
		{Name: colRound, Type: arrow.PrimitiveTypes.Int32},
		{Name: colAttack, Type: arrow.BinaryTypes.String},
		{Name: colThreat, Type: arrow.BinaryTypes.String},
		{Name: colScore, Type: arrow.PrimitiveTypes.Float64},
	}
	seen := map[string]bool{}
	for _, name := range m.MetricNames {
		if err := checkColumnName(name, fixedScoreColumns, seen); err != nil {
			return nil, fmt.Errorf("metric: %w", err)
		}
		fields = append(fields, arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64})
	}
	md := arrow.NewMetadata(
		[]string{KeyFormatVersion, KeyKind, KeyConfig, KeyDatasetHash, KeyToolVersion},
		[]string{checkedFormatVersion, KindScores, string(config), m.DatasetHash, m.ToolVersion},
	)
	return arrow.NewSchema(fields, &md), nil
}

// ScoreWriter writes one score file; like Writer, the file appears only on a successful Close.
type ScoreWriter struct {
	fw   *fileWriter
	meta ScoreMeta
}

// CreateScores starts a score file at path.
func CreateScores(path string, meta ScoreMeta, opts ...Option) (*ScoreWriter, error) {
	schema, err := scoreSchema(meta)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	fw, err := newFileWriter(path, schema, newOptions(opts))
	if err != nil {
		return nil, err
	}
	return &ScoreWriter{fw: fw, meta: meta}, nil
}

// Write appends scores; on a validation error none of them is written.
func (w *ScoreWriter) Write(scores ...Score) error {
	if err := w.fw.usable(); err != nil {
		return err
	}
	for i, s := range scores {
		if err := w.check(s); err != nil {
			return fmt.Errorf("write %s: score %d (run %d, round %d): %w", w.fw.path, i, s.RunID, s.Round, err)
		}
	}
	b := w.fw.b
	for _, s := range scores {
		b.Field(0).(*array.Int64Builder).Append(s.RunID)
		b.Field(1).(*array.Int64Builder).Append(s.PairID)
		b.Field(2).(*array.Int8Builder).Append(s.World)
		b.Field(3).(*array.Int32Builder).Append(s.Round)
		b.Field(4).(*array.StringBuilder).Append(s.Attack)
		b.Field(5).(*array.StringBuilder).Append(s.Threat)
		b.Field(6).(*array.Float64Builder).Append(s.Score)
		for j, m := range s.Metrics {
			b.Field(7 + j).(*array.Float64Builder).Append(m)
		}
		if err := w.fw.added(40 + len(s.Attack) + len(s.Threat) + 8*len(s.Metrics)); err != nil {
			return err
		}
	}
	return nil
}

func (w *ScoreWriter) check(s Score) error {
	if err := scoreValueError(s.Score); err != nil {
		return err
	}
	switch {
	case s.World != WorldC && s.World != WorldCPrime:
		return fmt.Errorf("world %d, want 0 (C) or 1 (C')", s.World)
	case s.Round < 0:
		return fmt.Errorf("round %d, want >= 0", s.Round)
	case s.Attack == "":
		return errors.New("empty attack name")
	case s.Threat == "" || !ValidThreat(s.Threat):
		return fmt.Errorf("threat model %q, want %q, %q or %q", s.Threat, ThreatFinal, ThreatAllIterates, ThreatUploads)
	case len(s.Metrics) != len(w.meta.MetricNames):
		return fmt.Errorf("%d metrics, the file declares %d %v", len(s.Metrics), len(w.meta.MetricNames), w.meta.MetricNames)
	}
	return nil
}

// Close completes the file and moves it into place.
func (w *ScoreWriter) Close() error { return w.fw.close() }

// Abort discards the file. It does nothing after Close.
func (w *ScoreWriter) Abort() error { return w.fw.abort() }

// ReadScores reads the scores of a score file: an Arrow IPC file with the columns of a fedaudit
// score file, or a CSV file with a header row. The format is told by content (the "ARROW1"
// magic), not by the file name. Both need columns world (0 = C, 1 = C') and score (higher means
// world C); round, attack, threat, run_id and pair_id are optional, with defaults 0,
// DefaultAttack, "" and 0. CSV columns may come in any order; a column of another name is an
// error (a misspelt "round" must not be dropped silently). A pair_id column declares the scores
// coupled (ScoreFile.Coupled).
func ReadScores(path string) ([]Score, error) {
	sf, err := ReadScoreFile(path)
	if err != nil {
		return nil, err
	}
	return sf.Scores, nil
}

// ReadScoreFile is ReadScores that also returns the file's metadata. Arrow files report their
// extra float64 columns as metrics; CSV files have none.
func ReadScoreFile(path string) (*ScoreFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read scores %s: %w", path, bare(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read scores %s: %w", path, bare(err))
	}
	if st.IsDir() {
		return nil, fmt.Errorf("read scores %s: is a directory", path)
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("read scores %s: empty file", path)
	}
	head := make([]byte, len(integrity.Magic))
	n, _ := f.ReadAt(head, 0)
	var sf *ScoreFile
	switch {
	case string(head[:n]) == integrity.Magic:
		sf, err = readScoresArrow(path)
	case n >= 4 && bytes.Equal(head[:4], []byte{0xff, 0xff, 0xff, 0xff}):
		err = errors.New("Arrow IPC stream format is not supported; write the file format (pyarrow.ipc.new_file or feather)")
	case bytes.IndexByte(head[:n], 0) >= 0:
		// No text file holds a NUL: a binary file of another kind, or zeros where a write was
		// lost. The CSV reader's "unknown column" quoted kilobytes of them.
		err = errors.New("neither an Arrow file (it does not start with ARROW1) nor a CSV file (it holds NUL bytes)")
	default:
		sf, err = readScoresCSV(f)
	}
	if err != nil {
		return nil, fmt.Errorf("read scores %s: %w", path, err)
	}
	if len(sf.Scores) == 0 {
		return nil, fmt.Errorf("read scores %s: no rows", path)
	}
	return sf, nil
}

// minRepeatedValues is how many distinct scores a group must have before checkRepeatedRows
// reads equal multiplicities as repeated rows: scores on a coarse grid (a label accuracy of
// k/B, randomized response) repeat legitimately. With 10, ranks spread over 11 values in 22
// runs a world were refused in 2 of 1,000 files (a review's simulation; 1.5e-4 a group); with
// 16, none in 400,000 groups of the likeliest grids (about 1e-8 at worst). Groups of fewer
// runs certify next to nothing anyway.
const minRepeatedValues = 16

// checkRepeatedRows refuses a score file without run ids whose rows were repeated: in
// some (attack, threat, round, world) the counts of the distinct scores (at least
// minRepeatedValues of them) are all multiples of one k >= 2 and 9 in 10 are k itself. Rows
// without ids are separate runs, so k copies of n runs (two exports concatenated, scores of
// each round written without a round column in a loop that wrote every row each time) were
// judged as k n independent runs: with 5 copies a claim at the true mu was VIOLATED in a third
// of audits. The error names the two earliest rows of the smallest score repeated k times. A
// copy of part of the file (all runs, then some of them again) is repeatedBlock's to find.
// Pair ids do not exempt a file: a copy of a file of pairs under offset pair ids (a shard
// concatenated twice) is new pairs by its ids, and 5 copies gave a true claim VIOLATED in 8
// of 20 audits; within a world the rows are separate runs all the same.
func checkRepeatedRows(scores []Score, where func(i int) string) error {
	idx, err := rowIndex(scores)
	if err != nil {
		return err
	}
	group := func(x, y *Score) int {
		return cmp.Or(strings.Compare(x.Attack, y.Attack), strings.Compare(x.Threat, y.Threat),
			cmp.Compare(x.Round, y.Round), cmp.Compare(x.World, y.World))
	}
	slices.SortFunc(idx, func(a, b int32) int {
		x, y := &scores[a], &scores[b]
		return cmp.Or(group(x, y), cmp.Compare(x.Score, y.Score), cmp.Compare(a, b))
	})
	for start := 0; start < len(idx); {
		end := start + 1
		for end < len(idx) && group(&scores[idx[start]], &scores[idx[end]]) == 0 {
			end++
		}
		// Within the group, runs of equal scores (by score, then position): their lengths'
		// greatest common divisor k, and how many have length exactly k. Copies of a file
		// repeat every score k times, and a score that occurred m times in the original (a
		// clipped or floored score) k m times.
		k, distinct, ofK := 0, 0, 0
		var firstOfK int
		lengths := func(visit func(i, n int)) {
			for i := start; i < end; {
				j := i + 1
				for j < end && scores[idx[j]].Score == scores[idx[i]].Score {
					j++
				}
				visit(i, j-i)
				i = j
			}
		}
		lengths(func(_, n int) { k, distinct = gcd(k, n), distinct+1 })
		lengths(func(i, n int) {
			if n == k {
				if ofK == 0 {
					firstOfK = i
				}
				ofK++
			}
		})
		// Legitimate ties (scores on a grid) have lengths of every size: 9 in 10 distinct
		// scores of the same length k >= 2, over at least minRepeatedValues of them, are copies.
		if k >= 2 && distinct >= minRepeatedValues && 10*ofK >= 9*distinct {
			first, second := idx[firstOfK], idx[firstOfK+1] // the two earliest rows of that score
			s := &scores[first]
			return fmt.Errorf("%s repeats %s (score %v, world %s, attack %q, round %d), and %d of the %d distinct scores of that world are there %d times each: the rows look repeated (exports concatenated, or written %d times over); rows without run_id are separate runs, so the copies would be judged as %d times the runs. Remove the repeats, or give each row its run's run_id",
				where(int(second)), where(int(first)), s.Score, WorldName(s.World), s.Attack, s.Round, ofK, distinct, k, k, k)
		}
		start = end
	}
	return repeatedBlock(scores, idx, where, group)
}

// blockRows is how many consecutive rows of one world repeated in the same order make a copy,
// when they hold as many distinct scores: by chance that happens to continuous scores never,
// and to scores on a grid of g >= 16 values with probability (g-16)!/g! per pair of windows of
// distinct scores, at most 5e-14 (10 rows on a grid of 10 values: about 2% in a million rows).
const blockRows = 16

// repeatedBlock finds part of a file written again: blockRows consecutive rows of one attack,
// threat, round and world (in file order), all of distinct scores, that recur in the same order
// later (all the runs, then some of them again: the copies' counts have no common divisor).
// idx is an index of every row, in any order; it is sorted again.
func repeatedBlock(scores []Score, idx []int32, where func(i int) string, group func(x, y *Score) int) error {
	slices.SortFunc(idx, func(a, b int32) int { return cmp.Or(group(&scores[a], &scores[b]), cmp.Compare(a, b)) })
	seen := map[uint64]int{} // a window's hash -> its start in idx
	for start := 0; start < len(idx); {
		end := start + 1
		for end < len(idx) && group(&scores[idx[start]], &scores[idx[end]]) == 0 {
			end++
		}
		clear(seen)
		for w := start; w+blockRows <= end; w++ {
			window := idx[w : w+blockRows]
			h := uint64(14695981039346656037)
			for _, i := range window {
				h = (h ^ math.Float64bits(scores[i].Score)) * 1099511628211
			}
			first, ok := seen[h]
			if !ok {
				seen[h] = w
				continue
			}
			if first+blockRows > w || !sameScores(scores, idx[first:first+blockRows], window) || !allDistinct(scores, window) {
				continue // overlapping, a collision of the hash, or ties a grid makes
			}
			s := &scores[idx[first]]
			return fmt.Errorf("%s to %s repeat %s to %s in order (world %s, attack %q, round %d): %d consecutive rows of distinct scores written again, which runs do not give by chance; rows without run_id are separate runs, so the copies would be judged as more runs. Remove the repeats, or give each row its run's run_id",
				where(int(window[0])), where(int(window[blockRows-1])), where(int(idx[first])), where(int(idx[first+blockRows-1])),
				WorldName(s.World), s.Attack, s.Round, blockRows)
		}
		start = end
	}
	return nil
}

func sameScores(scores []Score, a, b []int32) bool {
	for k := range a {
		if scores[a[k]].Score != scores[b[k]].Score {
			return false
		}
	}
	return true
}

func allDistinct(scores []Score, rows []int32) bool {
	for k := range rows {
		for l := range k {
			if scores[rows[k]].Score == scores[rows[l]].Score {
				return false
			}
		}
	}
	return true
}

// rowIndex is the positions of scores as 4-byte indices, for the checks that order the rows
// (maps keyed by row held about 100 bytes a row).
func rowIndex(scores []Score) ([]int32, error) {
	if len(scores) > math.MaxInt32 {
		return nil, fmt.Errorf("%d scores: more than a score file may hold (%d)", len(scores), math.MaxInt32)
	}
	idx := make([]int32, len(scores))
	for i := range idx {
		idx[i] = int32(i)
	}
	return idx, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// checkRunIDs checks the run ids of a score file that has a run_id column: each run is scored
// once per attack, threat and round, and is of one world. A file whose rows were repeated (two
// exports concatenated, a join that duplicated rows) would otherwise count each run again: n
// runs judged as k n independent ones narrow the confidence bounds as if k times the runs had
// been trained, and can certify a violation the n runs do not show. where names score i for
// messages (a CSV line, an Arrow row).
//
// The rows are ordered by run, attack, threat, round and then position (an index of 4 bytes a
// row), and neighbours compared: maps keyed by row held about 100 bytes a row and took a third
// of an analysis of 8.3 million scores. The error names the repeated row, or the row whose
// world differs from the run's first, that comes first in the file.
func checkRunIDs(scores []Score, where func(i int) string) error {
	idx, err := rowIndex(scores)
	if err != nil {
		return err
	}
	slices.SortFunc(idx, func(a, b int32) int {
		x, y := &scores[a], &scores[b]
		return cmp.Or(cmp.Compare(x.RunID, y.RunID), strings.Compare(x.Attack, y.Attack), strings.Compare(x.Threat, y.Threat),
			cmp.Compare(x.Round, y.Round), cmp.Compare(a, b))
	})
	var errAt int32 = -1
	note := func(at int32, e error) {
		if errAt < 0 || at < errAt {
			errAt, err = at, e
		}
	}
	runFirst := int32(-1) // the first row (by position) of the current run
	for p, i := range idx {
		s := &scores[i]
		if p == 0 || scores[idx[p-1]].RunID != s.RunID {
			runFirst = i
			for _, j := range idx[p:] {
				if scores[j].RunID != s.RunID {
					break
				}
				runFirst = min(runFirst, j)
			}
		}
		// The world first: a row in the other world is a second score of its run too, and the
		// world names the likelier slip, a pair's id given as the run's.
		if f := &scores[runFirst]; f.World != s.World {
			note(i, fmt.Errorf("%s: run %d is in world %s, and in world %s at %s: a run trains on one of the two datasets (the pair's id, shared by its two runs, goes in pair_id)",
				where(int(i)), s.RunID, WorldName(s.World), WorldName(f.World), where(int(runFirst))))
		}
		if p > 0 {
			prev := &scores[idx[p-1]]
			if prev.RunID == s.RunID && prev.Attack == s.Attack && prev.Threat == s.Threat && prev.Round == s.Round {
				note(i, fmt.Errorf("%s: run %d has a second score for attack %q threat %q round %d (the first is at %s): a run is scored once per attack, threat and round, and a repeated row would count the run twice",
					where(int(i)), s.RunID, s.Attack, s.Threat, s.Round, where(int(idx[p-1]))))
			}
		}
	}
	return err
}

// scoreColumns maps the columns a score reader looks for to their positions (-1 when absent).
type scoreColumns struct {
	runID, pairID, world, round, attack, threat, score int
}

func (c *scoreColumns) slot(name string) *int {
	switch name {
	case colRunID:
		return &c.runID
	case colPairID:
		return &c.pairID
	case colWorld:
		return &c.world
	case colRound:
		return &c.round
	case colAttack:
		return &c.attack
	case colThreat:
		return &c.threat
	case colScore:
		return &c.score
	}
	return nil
}

func newScoreColumns() scoreColumns {
	return scoreColumns{-1, -1, -1, -1, -1, -1, -1}
}

// check reports a missing required column.
func (c *scoreColumns) check() error {
	if c.world < 0 {
		return errors.New("missing required column \"world\"")
	}
	if c.score < 0 {
		return errors.New("missing required column \"score\"")
	}
	return nil
}

// finishScore checks the values every reader must check, whatever the format.
func finishScore(s *Score, world float64) error {
	if world != 0 && world != 1 {
		return fmt.Errorf("world %v, want 0 (C) or 1 (C')", world)
	}
	s.World = int8(world)
	if err := scoreValueError(s.Score); err != nil {
		return err
	}
	switch {
	case s.Round < 0:
		return fmt.Errorf("round %d is negative", s.Round) // readers refuse it first, naming the column
	case !ValidThreat(s.Threat):
		return threatError(s.Threat)
	}
	return nil
}

// scoreValueError says why a score cannot be analyzed, or nil. The statistics need finite
// scores, and only their order matters, so a certain verdict is any finite score beyond all the
// others; the largest float64 is reserved by the analysis (a threshold lies just above every
// score), which refused it by the score's index in its group rather than by the file's line.
func scoreValueError(v float64) error {
	switch {
	case math.IsNaN(v):
		return errors.New("score is NaN")
	case math.IsInf(v, 0):
		return fmt.Errorf("score is %v; scores must be finite (only their order matters: give a certain verdict a finite score beyond all others)", v)
	case v == math.MaxFloat64:
		return errors.New("score is the largest float64, which the analysis reserves (a threshold lies just above every score): give a certain verdict a finite score beyond all others and below it, such as 1e300")
	}
	return nil
}

func readScoresCSV(r io.Reader) (*ScoreFile, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("empty file")
	}
	if err != nil {
		return nil, err
	}
	cols := newScoreColumns()
	for i, name := range header {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff") // byte order mark written by spreadsheets
		}
		name = strings.ToLower(strings.TrimSpace(name))
		slot := cols.slot(name)
		if slot == nil {
			return nil, fmt.Errorf("line 1: %s", unknownColumn(name))
		}
		if *slot >= 0 {
			return nil, fmt.Errorf("line 1: duplicate column %q", name)
		}
		*slot = i
	}
	if err := cols.check(); err != nil {
		return nil, fmt.Errorf("line 1: %w", err)
	}
	var out []Score
	var lines []int
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		s, err := parseCSVScore(rec, cols)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, s)
		lines = append(lines, line)
	}
	where := func(i int) string { return fmt.Sprintf("line %d", lines[i]) }
	if cols.runID >= 0 {
		if err := checkRunIDs(out, where); err != nil {
			return nil, err
		}
	} else {
		if err := checkRepeatedRows(out, where); err != nil {
			return nil, err
		}
	}
	return &ScoreFile{Scores: out, Coupled: cols.pairID >= 0}, nil
}

// csvColumns are the columns a CSV score file may have, in the order error messages list them.
var csvColumns = []string{colWorld, colScore, colRound, colAttack, colThreat, colRunID, colPairID}

// unknownColumn describes a CSV column that is not a score column, suggesting the known name
// it is closest to when it looks like a typo.
func unknownColumn(name string) string {
	shown := name
	if len(shown) > 40 {
		shown = shown[:40] + "..." // a whole line of another kind of file, not a column name
	}
	msg := fmt.Sprintf("unknown column %q", shown)
	if best := suggest.Closest(name, csvColumns, 2); best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	return msg + "; a score CSV has the columns " + strings.Join(csvColumns, ", ") + " (world and score required)"
}

// scoreColumnsText names the columns of an Arrow score file for error messages.
var scoreColumnsText = "an Arrow score file has the columns " + strings.Join(csvColumns, ", ") + " (world and score required)"

func parseCSVScore(rec []string, c scoreColumns) (Score, error) {
	s := Score{Attack: DefaultAttack}
	field := func(i int) string { return strings.TrimSpace(rec[i]) }
	var err error
	// A world is 0 or 1 (as a number: "1.0" too) or named as in import manifests (C, C').
	var world float64
	if w, werr := ParseWorld(field(c.world)); werr == nil {
		world = float64(w)
	} else if world, err = strconv.ParseFloat(field(c.world), 64); err != nil {
		return s, werr
	}
	if s.Score, err = parseNumber(field(c.score), colScore); err != nil {
		return s, err
	}
	for _, ic := range []struct {
		idx  int
		name string
		dst  *int64
		max  int64
	}{
		{c.runID, colRunID, &s.RunID, math.MaxInt64},
		{c.pairID, colPairID, &s.PairID, math.MaxInt64},
	} {
		if ic.idx < 0 {
			continue
		}
		if *ic.dst, err = parseInteger(field(ic.idx), ic.name, math.MinInt64, ic.max); err != nil {
			return s, err
		}
	}
	if c.round >= 0 {
		r, err := parseInteger(field(c.round), colRound, math.MinInt32, math.MaxInt32)
		if err != nil {
			return s, err
		}
		if r < 0 {
			return s, fmt.Errorf("column %s: %d is negative; rounds count from 0", colRound, r)
		}
		s.Round = int32(r)
	}
	if c.attack >= 0 {
		if a := field(c.attack); a != "" {
			s.Attack = a
		}
	}
	if c.threat >= 0 {
		s.Threat = field(c.threat)
	}
	return s, finishScore(&s, world)
}

func parseNumber(text, column string) (float64, error) {
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, fmt.Errorf("column %s: bad number %q", column, text)
	}
	return v, nil
}

// parseInteger accepts integers written as integers or as integral floats ("3.0"), as tools that
// pass numbers through floating point write them.
func parseInteger(text, column string, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(text, 64)
		if ferr != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, fmt.Errorf("column %s: bad integer %q", column, text)
		}
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("column %s: %d out of range", column, v)
	}
	return v, nil
}

func readScoresArrow(path string) (*ScoreFile, error) {
	af, err := openArrowFile(path, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer af.Close()
	r := af.Reader()
	sc := r.Schema()
	var sf ScoreFile
	// Files of other tools carry no fedaudit metadata; ours must be of a version we know.
	_, ours := sc.Metadata().GetValue(KeyKind)
	if ours {
		if sf.Meta.Config, sf.Meta.DatasetHash, sf.Meta.ToolVersion, err = commonMeta(sc, KindScores); err != nil {
			return nil, err
		}
	}
	cols, metrics, err := arrowScoreColumns(sc, ours)
	if err != nil {
		return nil, err
	}
	for _, i := range metrics {
		sf.Meta.MetricNames = append(sf.Meta.MetricNames, sc.Field(i).Name)
	}
	sf.Coupled = cols.pairID >= 0
	rows, err := declaredRows(af)
	if err != nil {
		return nil, err
	}
	sf.Scores = make([]Score, 0, rows)
	base := 0
	names := map[string]string{} // each attack and threat name held once, not once a row
	// The batches were verified by declaredRows.
	for i := 0; i < r.NumRecords(); i++ {
		err := integrity.DecodeSafely(func() error {
			rec, err := r.RecordAt(i)
			if err != nil {
				return err
			}
			defer rec.Release()
			sf.Scores, err = appendArrowScores(sf.Scores, rec, cols, metrics, base, names)
			base += int(rec.NumRows())
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
	}
	// A score file is read whole: its bytes outside the record batches are checked too (the
	// whole-file checksum), so that a damaged file is scored again, never used.
	if err := af.VerifyRest(); err != nil {
		return nil, err
	}
	where := func(i int) string { return fmt.Sprintf("row %d", i) }
	if cols.runID >= 0 {
		if err := checkRunIDs(sf.Scores, where); err != nil {
			return nil, err
		}
	} else {
		if err := checkRepeatedRows(sf.Scores, where); err != nil {
			return nil, err
		}
	}
	return &sf, nil
}

// arrowScoreColumns finds the score columns of an Arrow score file as the CSV reader does
// (names without regard to case or surrounding space) and its metrics, the other float64
// columns. A column that is neither is refused, as in a CSV, and so is a metric named like a
// score column the file lacks: a foreign file's "rounds" or "Round" column was taken for a
// metric or skipped, its rounds read as 0, and the runs' scores of every round pooled into
// one row as if they were independent runs (a true claim judged VIOLATED 78 times in 100).
// Names farther from "round" do the same ("T", "step", "epoch", "checkpoint": a true claim
// VIOLATED in 7 of 20 audits), so another tool's file (ours is true for fedaudit's own, whose
// rows always have their round) that has no round column may have no other columns either, as
// a CSV may not.
func arrowScoreColumns(sc *arrow.Schema, ours bool) (scoreColumns, []int, error) {
	cols := newScoreColumns()
	var unknown []int
	for i, fld := range sc.Fields() {
		name := strings.ToLower(strings.TrimSpace(fld.Name))
		slot := cols.slot(name)
		if slot == nil {
			unknown = append(unknown, i)
			continue
		}
		if *slot >= 0 {
			return cols, nil, fmt.Errorf("duplicate column %q", name)
		}
		*slot = i
	}
	var missing []string
	for _, name := range csvColumns {
		if *cols.slot(name) < 0 {
			missing = append(missing, name)
		}
	}
	var metrics []int
	for _, i := range unknown {
		fld := sc.Field(i)
		name := strings.ToLower(strings.TrimSpace(fld.Name))
		if best := nearMiss(name, missing); best != "" {
			return cols, nil, fmt.Errorf("column %q is not a score column, and the file has no %q: did you mean %q? (a float64 column of another name is a metric; %s)", fld.Name, best, best, scoreColumnsText)
		}
		if fld.Type.ID() != arrow.FLOAT64 {
			return cols, nil, fmt.Errorf("unknown column %q of type %s: %s, and other columns are metrics, which are float64", fld.Name, fld.Type, scoreColumnsText)
		}
		if !ours && cols.round < 0 {
			return cols, nil, fmt.Errorf("unknown column %q, in a file without a %q column: if it holds the checkpoint, name it %q (read as an extra column, the scores of every round of a run were pooled as if they were separate runs); otherwise drop it (%s; extra float64 columns, metrics, are read beside a round column)", fld.Name, colRound, colRound, scoreColumnsText)
		}
		metrics = append(metrics, i)
	}
	return cols, metrics, cols.check()
}

// nearMiss is the score column of names that name probably means: within two edits of it, or
// one without its "_id" ("pair" for pair_id, as outputs tables name it); "" when none is.
func nearMiss(name string, names []string) string {
	if best := suggest.Closest(name, names, 2); best != "" {
		return best
	}
	for _, n := range names {
		if strings.TrimSuffix(n, "_id") == name || strings.TrimSuffix(n, "_id")+"id" == name {
			return n
		}
	}
	return ""
}

// declaredRows verifies the record batches of a file with checksums and returns the rows they
// declare, so that its scores are read into a slice of their size; a file without checksums
// (another tool's) is not trusted that far, and its rows are appended as they come (0).
func declaredRows(af *integrity.File) (int, error) {
	if !af.Checked() {
		return 0, nil
	}
	// No more rows reserved than an eighth of the file's bytes, so that a file made to deceive
	// reserves at most some ten times its size (a Score is 88 bytes and more); ours take 50
	// bytes a row and more on disk (the scores are floats that do not compress), and a file of
	// fewer grows its slice as it is decoded.
	limit := af.Size() / 8
	var total int64
	for i := 0; i < af.Reader().NumRecords(); i++ {
		if err := af.VerifyBatch(i); err != nil {
			return 0, fmt.Errorf("batch %d: %w", i, err)
		}
		n, err := af.BatchRows(i)
		if err != nil {
			return 0, err
		}
		total = min(total+n, limit) // n < 2^63 and total <= limit: no overflow
	}
	return int(total), nil
}

// appendArrowScores decodes one batch. Columns are accepted in any integer, floating-point or
// string type that holds their values, since other tools choose their own widths.
//
// A score file holds millions of rows (16,000 pairs of 21 checkpoints and 13 attacks: 8.3
// million), so a row's attack and threat are held once in names, and the batch's metrics in one
// array, not an allocation a row grown by appends.
func appendArrowScores(out []Score, rec arrow.Record, c scoreColumns, metrics []int, base int, names map[string]string) ([]Score, error) {
	n := int(rec.NumRows())
	intern := func(s string) string {
		if v, ok := names[s]; ok {
			return v
		}
		s = strings.Clone(s) // not a view of the batch's buffer
		names[s] = s
		return s
	}
	var backing []float64
	if len(metrics) > 0 {
		backing = make([]float64, n*len(metrics))
	}
	for i := 0; i < int(rec.NumCols()); i++ {
		if rec.Column(i).Len() != n {
			return nil, fmt.Errorf("column %q has %d values for %d rows", rec.ColumnName(i), rec.Column(i).Len(), n)
		}
	}
	col := func(idx int) arrow.Array {
		if idx < 0 {
			return nil
		}
		return rec.Column(idx)
	}
	named := func(idx int, err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("column %s: %w", rec.ColumnName(idx), err)
	}
	for k := 0; k < n; k++ {
		s := Score{Attack: DefaultAttack}
		w, err := floatAt(col(c.world), k)
		err = named(c.world, err)
		if err == nil {
			s.Score, err = floatAt(col(c.score), k)
			err = named(c.score, err)
		}
		for _, ic := range []struct {
			idx    int
			dst    *int64
			lo, hi int64
		}{
			{c.runID, &s.RunID, math.MinInt64, math.MaxInt64},
			{c.pairID, &s.PairID, math.MinInt64, math.MaxInt64},
		} {
			if err == nil && ic.idx >= 0 {
				*ic.dst, err = intAt(col(ic.idx), k, ic.lo, ic.hi)
				err = named(ic.idx, err)
			}
		}
		if err == nil && c.round >= 0 {
			var r int64
			r, err = intAt(col(c.round), k, math.MinInt32, math.MaxInt32)
			if err == nil && r < 0 {
				err = fmt.Errorf("value %d is negative; rounds count from 0", r)
			}
			s.Round, err = int32(r), named(c.round, err)
		}
		if err == nil && c.attack >= 0 {
			var a string
			if a, err = stringAt(col(c.attack), k); a != "" {
				s.Attack = intern(a)
			}
			err = named(c.attack, err)
		}
		if err == nil && c.threat >= 0 {
			var t string
			t, err = stringAt(col(c.threat), k)
			s.Threat, err = intern(t), named(c.threat, err)
		}
		if len(metrics) > 0 {
			s.Metrics = backing[k*len(metrics) : (k+1)*len(metrics) : (k+1)*len(metrics)]
		}
		for j, m := range metrics {
			if err != nil {
				break
			}
			s.Metrics[j], err = floatAt(col(m), k)
			err = named(m, err)
		}
		if err == nil {
			err = finishScore(&s, w)
		}
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", base+k, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func columnName(a arrow.Array) string { return a.DataType().Name() }

func floatAt(a arrow.Array, k int) (float64, error) {
	if a.IsNull(k) {
		return 0, errors.New("null value")
	}
	switch a := a.(type) {
	case *array.Float64:
		return a.Value(k), nil
	case *array.Float32:
		return float64(a.Value(k)), nil
	}
	v, err := intAt(a, k, math.MinInt64, math.MaxInt64)
	if err != nil {
		return 0, err
	}
	return float64(v), nil
}

func intAt(a arrow.Array, k int, lo, hi int64) (int64, error) {
	if a.IsNull(k) {
		return 0, errors.New("null value")
	}
	var v int64
	switch a := a.(type) {
	case *array.Int8:
		v = int64(a.Value(k))
	case *array.Int16:
		v = int64(a.Value(k))
	case *array.Int32:
		v = int64(a.Value(k))
	case *array.Int64:
		v = a.Value(k)
	case *array.Uint8:
		v = int64(a.Value(k))
	case *array.Uint16:
		v = int64(a.Value(k))
	case *array.Uint32:
		v = int64(a.Value(k))
	case *array.Uint64:
		u := a.Value(k)
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("value %d out of range", u)
		}
		v = int64(u)
	case *array.Float64, *array.Float32:
		f, _ := floatAt(a, k)
		if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, fmt.Errorf("value %v is not an integer", f)
		}
		v = int64(f)
	default:
		return 0, fmt.Errorf("unsupported column type %s", columnName(a))
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("value %d out of range", v)
	}
	return v, nil
}

func stringAt(a arrow.Array, k int) (string, error) {
	if a.IsNull(k) {
		return "", errors.New("null value")
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(k), nil
	case *array.LargeString:
		return a.Value(k), nil
	}
	return "", fmt.Errorf("unsupported column type %s for a string", columnName(a))
}
