// Package runs defines the files that pass between the stages of an audit: run files, which
// record the checkpoints of coupled training runs, and score files, which record what an attack
// makes of them. Both are Apache Arrow IPC files (the "Feather v2" file format) built from
// standard Arrow types only, so any Arrow implementation (pyarrow, arrow-rs, DuckDB) opens them.
//
// train writes run files with Create; attacks read them with Open and write scores with
// CreateScores; audit reads scores with ReadScores, which also accepts CSV from other tools.
// Nothing outside this package knows the Arrow schema, and this package names every column,
// the statistic columns (StatLLRAll, StatTargetLossC, ...) included.
//
// Writers put a file in place only when it is complete: they write to a temporary name in the
// destination directory and rename it on Close, so a crashed job never leaves a file that looks
// whole. Readers stream a file batch by batch and refuse to mix shards of different experiments.
package runs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow/go/v15/arrow"
)

// FormatVersion is the newest version of the layout written by this package. Readers refuse
// files of another version rather than misread them. Version 2 added the checksums of the
// footer (see checksum.go); files of version 1, written before them, are still read,
// unverified. Version 3 added the canary columns of run files (Meta.Canaries) and the canary
// score file (KindCanaryScores); a file that needs neither is still written as version 2, so
// that readers of version 2 keep reading every file they can read correctly.
const FormatVersion = "3"

// checkedFormatVersion is the version of files with checksums but without canaries.
const checkedFormatVersion = "2"

// legacyFormatVersion is the oldest version readers still accept: the version 2 layout
// without checksums.
const legacyFormatVersion = "1"

// knownFormatVersion reports whether readers of this package read files of version v.
func knownFormatVersion(v string) bool {
	return v == FormatVersion || v == checkedFormatVersion || v == legacyFormatVersion
}

// Keys of the Arrow schema metadata written into every file.
const (
	KeyFormatVersion = "fedaudit.format_version" // FormatVersion
	KeyKind          = "fedaudit.kind"           // KindRuns or KindScores
	KeyConfig        = "fedaudit.config"         // experiment config, compact JSON
	KeyDatasetHash   = "fedaudit.dataset_sha256" // content hash of the dataset, hex
	KeyToolVersion   = "fedaudit.version"        // version of the tool that wrote the file
	KeyShard         = "fedaudit.shard"          // "i/n", run files only
	KeyCanaries      = "fedaudit.canaries"       // k, the canaries of every run; run files with canaries only
)

// Values of KeyKind, so that a score file handed to a run-file reader is named as such instead of
// failing on a missing column.
const (
	KindRuns   = "runs"
	KindScores = "scores"
	// KindCanaryScores is a file of canary scores: one score per canary of a run at a round
	// (CreateCanaryScores), for the one-run audits.
	KindCanaryScores = "canary-scores"
)

// Names of the statistic columns of run files (Meta.StatNames). This package owns every column
// name; trainers and attacks use these constants.
const (
	// The informed adversary's statistics (recorded by training when train.informed is set):
	// the log-likelihood ratio over every iterate, of the last round, and the realized mu^2.
	StatLLRAll  = "informed_llr_all"
	StatLLRLast = "informed_llr_last"
	StatMu2     = "informed_mu2"
	// StatLLRUpload is the ratio of the target client's upload of the last round given the model
	// it started from (the uploads observer; Noisy-FedAvg, FedProx and DP-SGD only, whose
	// uploads carry the client's noise), and StatMu2Upload its mu^2 = ||phi_i(w) - phi'_i(w)||^2
	// / sigma^2.
	StatLLRUpload = "informed_llr_upload"
	StatMu2Upload = "informed_mu2_upload"
	// StatLLRDiff is the informed adversary's ratio of the rounds' noise residuals differenced
	// over consecutive rounds, summed over rounds 2..T: noise drawn once and reused every
	// round cancels in it. The importer computes it when it replays imported iterates
	// (docs/import.md); fedaudit's trainer, whose noise is fresh by construction, does not.
	StatLLRDiff = "informed_llr_diff"
	// Loss and logit margin of the current global model on the target sample as in C
	// (epsilon) and as in C' (epsilon'), which the run-file writer records for every run.
	StatTargetLossC        = "target_loss_c"
	StatTargetLossCPrime   = "target_loss_cprime"
	StatTargetMarginC      = "target_margin_c"
	StatTargetMarginCPrime = "target_margin_cprime"
)

// Names of the canary observation columns of run files (Meta.CanaryStatNames): one value per
// canary of the run, at the checkpoint. Direction canaries (canary clients whose update is a
// fixed direction u_j of norm the clip norm) record the first three, record canaries (samples
// placed in the clients' data) the last two.
const (
	// CanaryCosFinal is the cosine between w_T - w_0 and u_j: the final model's statistic of
	// Andrew et al.'s one-shot estimate.
	CanaryCosFinal = "canary_cos_final"
	// CanaryCosMax is the largest cosine between a round's model change w_{t+1} - w_t and u_j
	// over the rounds t < T: that estimate's statistic for an observer of every iterate.
	CanaryCosMax = "canary_cos_max"
	// CanaryLLRAll is the log-likelihood ratio, summed over the rounds t < T, of "canary j
	// took part" against "it did not" for the projection of each round's noisy sum on u_j,
	// under the deployment's own sampling rate and noise (public parameters of the mechanism).
	CanaryLLRAll = "canary_llr_all"
	// CanaryLoss and CanaryMargin are the global model's loss and logit margin on canary
	// record j; CanaryLossAlt and CanaryMarginAlt those on the sample its slot holds when the
	// canary is excluded.
	CanaryLoss      = "canary_loss"
	CanaryMargin    = "canary_margin"
	CanaryLossAlt   = "canary_loss_alt"
	CanaryMarginAlt = "canary_margin_alt"
)

// Names of the fixed columns of a run file, in schema order.
const (
	colRunID        = "run_id"
	colPairID       = "pair_id"
	colWorld        = "world"
	colSeed         = "seed"
	colRound        = "round"
	colDiverged     = "diverged"
	colTrainLoss    = "train_loss"
	colTestAccuracy = "test_accuracy"
	colParams       = "params"
	colUpload       = "upload"
	colCanaryIn     = "canary_in"
)

// World values: the run trained on C or on the adjacent C'.
const (
	WorldC      int8 = 0
	WorldCPrime int8 = 1
)

// WorldName returns "C" or "C'" for a world value and a number for anything else.
func WorldName(w int8) string {
	switch w {
	case WorldC:
		return "C"
	case WorldCPrime:
		return "C'"
	}
	return strconv.Itoa(int(w))
}

// Shard says which part of an experiment a file holds: shard Index (0-based) of Count.
// The zero Shard means the whole experiment in one file and is written as "0/1".
type Shard struct {
	Index, Count int
}

// String formats s as "i/n".
func (s Shard) String() string {
	s = s.normalized()
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

func (s Shard) normalized() Shard {
	if s.Count == 0 && s.Index == 0 {
		return Shard{0, 1}
	}
	return s
}

func (s Shard) validate() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("invalid shard %d/%d: want 0 <= index < count", s.Index, s.Count)
	}
	return nil
}

// ParseShard parses "i/n" with 0 <= i < n.
func ParseShard(text string) (Shard, error) {
	is, ns, ok := strings.Cut(text, "/")
	if !ok {
		return Shard{}, fmt.Errorf("invalid shard %q: want i/n", text)
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("invalid shard %q: want i/n", text)
	}
	s := Shard{Index: i, Count: n}
	if err := s.validate(); err != nil {
		return Shard{}, err
	}
	return s, nil
}

// FileName is the conventional name of a shard's run file, e.g. "runs-00003-of-00008.arrow".
// Readers go by the metadata inside a file, never by its name.
func (s Shard) FileName() string {
	s = s.normalized()
	return fmt.Sprintf("runs-%05d-of-%05d.arrow", s.Index, s.Count)
}

// Meta describes a run file. It travels in the Arrow schema metadata (Config, DatasetHash,
// ToolVersion, Shard) and in the schema itself (StatNames, HasParams, HasUpload).
type Meta struct {
	// Config is the full experiment config as JSON, so that every later step can recompute the
	// theoretical bounds. Writers store it compacted.
	Config []byte
	// DatasetHash is the content hash of the training data (hex SHA-256).
	DatasetHash string
	// ToolVersion is the version of the program that wrote the file.
	ToolVersion string
	// Shard is the part of the experiment the file holds. For a Table read from several shard
	// files it is the zero Shard; Table.Shards lists them.
	Shard Shard
	// StatNames names the float64 statistic columns, in order; Row.Stats is aligned with it.
	StatNames []string
	// HasParams and HasUpload say whether rows carry the global model parameters and the target
	// client's noisy upload.
	HasParams, HasUpload bool
	// Canaries is k, the number of canaries every run carries (0: none). Rows of a file with
	// canaries hold the run's inclusion bits (Row.CanaryIn) and one list of k observations
	// per name of CanaryStatNames (Row.CanaryStats).
	Canaries        int
	CanaryStatNames []string
	// Version is the format version of a file as read (KeyFormatVersion); writers ignore it and
	// write the version their layout needs.
	Version string
}

// CanaryStatIndex returns the position of the named canary statistic in Row.CanaryStats, or -1.
func (m Meta) CanaryStatIndex(name string) int {
	for i, n := range m.CanaryStatNames {
		if n == name {
			return i
		}
	}
	return -1
}

// formatVersion is the version a file with this Meta is written as: 3 with canaries, else 2.
func (m Meta) formatVersion() string {
	if m.Canaries > 0 {
		return FormatVersion
	}
	return checkedFormatVersion
}

// StatIndex returns the position of the named statistic in Row.Stats, or -1.
func (m Meta) StatIndex(name string) int {
	for i, n := range m.StatNames {
		if n == name {
			return i
		}
	}
	return -1
}

// Column names one column of a run file and its Arrow type.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Columns lists the columns of a run file with this Meta, in the order writers put them.
func (m Meta) Columns() []Column {
	fields := runFields(m)
	cols := make([]Column, len(fields))
	for i, f := range fields {
		cols[i] = Column{Name: f.Name, Type: typeName(f.Type)}
	}
	return cols
}

// typeName is the type as pyarrow prints it, without Arrow Go's element field decoration.
func typeName(t arrow.DataType) string {
	if lt, ok := t.(*arrow.ListType); ok {
		return "list<" + typeName(lt.Elem()) + ">"
	}
	return t.String()
}

// sameExperiment reports why two files cannot be read as one table, or "" when they can.
func (m Meta) sameExperiment(o Meta) string {
	switch {
	case !bytes.Equal(m.Config, o.Config):
		return "experiment configs differ"
	case m.DatasetHash != o.DatasetHash:
		return fmt.Sprintf("dataset hashes differ (%q, %q)", m.DatasetHash, o.DatasetHash)
	case m.ToolVersion != o.ToolVersion:
		return fmt.Sprintf("tool versions differ (%q, %q)", m.ToolVersion, o.ToolVersion)
	case !slices.Equal(m.StatNames, o.StatNames):
		return fmt.Sprintf("statistic columns differ (%v, %v)", m.StatNames, o.StatNames)
	case m.HasParams != o.HasParams || m.HasUpload != o.HasUpload:
		return "params/upload columns differ"
	case m.Canaries != o.Canaries || !slices.Equal(m.CanaryStatNames, o.CanaryStatNames):
		return fmt.Sprintf("canary columns differ (%d canaries %v, %d canaries %v)", m.Canaries, m.CanaryStatNames, o.Canaries, o.CanaryStatNames)
	}
	return ""
}

// Row is one checkpoint of one run: the model after Round rounds of run RunID, one of the two
// runs of pair PairID.
type Row struct {
	RunID  int64
	PairID int64
	World  int8 // WorldC or WorldCPrime
	Seed   uint64
	Round  int32
	// Diverged marks a run whose loss became non-finite; its later rows are kept, not dropped,
	// so that attacks see the same pairs in both worlds.
	Diverged     bool
	TrainLoss    float64
	TestAccuracy float64
	// Stats is aligned with Meta.StatNames.
	Stats []float64
	// Params and Upload are present only when the file declares them.
	Params []float32
	Upload []float32
	// CanaryIn holds the run's k canary inclusion bits and CanaryStats, aligned with
	// Meta.CanaryStatNames, k observations each; both are present only when the file declares
	// canaries.
	CanaryIn    []bool
	CanaryStats [][]float64
}

var fixedRunColumns = []string{colRunID, colPairID, colWorld, colSeed, colRound, colDiverged, colTrainLoss, colTestAccuracy, colParams, colUpload, colCanaryIn}

// boolList and float64List are the types of the canary columns.
var (
	boolList    = arrow.ListOfNonNullable(arrow.FixedWidthTypes.Boolean)
	float64List = arrow.ListOfNonNullable(arrow.PrimitiveTypes.Float64)
)

// float32List is the type of the params and upload columns. Elements are declared non-null;
// readers also accept a nullable element field, as other writers produce.
var float32List = arrow.ListOfNonNullable(arrow.PrimitiveTypes.Float32)

// checkColumnName rejects names that would make a schema ambiguous.
func checkColumnName(name string, reserved []string, seen map[string]bool) error {
	switch {
	case name == "":
		return errors.New("empty column name")
	case !utf8.ValidString(name):
		return fmt.Errorf("column name %q is not valid UTF-8", name)
	case seen[name]:
		return fmt.Errorf("duplicate column %q", name)
	}
	for _, r := range reserved {
		if name == r {
			return fmt.Errorf("column name %q is reserved", name)
		}
	}
	seen[name] = true
	return nil
}

// runSchema builds the schema of a run file for m, validating what the writer declared.
func runSchema(m Meta) (*arrow.Schema, error) {
	shard := m.Shard.normalized()
	if err := shard.validate(); err != nil {
		return nil, err
	}
	config, err := compactConfig(m.Config, true)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, name := range m.StatNames {
		if err := checkColumnName(name, fixedRunColumns, seen); err != nil {
			return nil, fmt.Errorf("statistic: %w", err)
		}
	}
	switch {
	case m.Canaries < 0:
		return nil, fmt.Errorf("%d canaries", m.Canaries)
	case m.Canaries == 0 && len(m.CanaryStatNames) > 0:
		return nil, fmt.Errorf("canary statistics %v without canaries", m.CanaryStatNames)
	}
	for _, name := range m.CanaryStatNames {
		if err := checkColumnName(name, fixedRunColumns, seen); err != nil {
			return nil, fmt.Errorf("canary statistic: %w", err)
		}
	}
	fields := runFields(m)
	keys := []string{KeyFormatVersion, KeyKind, KeyConfig, KeyDatasetHash, KeyToolVersion, KeyShard}
	vals := []string{m.formatVersion(), KindRuns, string(config), m.DatasetHash, m.ToolVersion, shard.String()}
	if m.Canaries > 0 {
		keys, vals = append(keys, KeyCanaries), append(vals, strconv.Itoa(m.Canaries))
	}
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &md), nil
}

// runFields lists the fields of a run file for m, in writing order.
func runFields(m Meta) []arrow.Field {
	fields := []arrow.Field{
		{Name: colRunID, Type: arrow.PrimitiveTypes.Int64},
		{Name: colPairID, Type: arrow.PrimitiveTypes.Int64},
		{Name: colWorld, Type: arrow.PrimitiveTypes.Int8},
		{Name: colSeed, Type: arrow.PrimitiveTypes.Uint64},
		{Name: colRound, Type: arrow.PrimitiveTypes.Int32},
		{Name: colDiverged, Type: arrow.FixedWidthTypes.Boolean},
		{Name: colTrainLoss, Type: arrow.PrimitiveTypes.Float64},
		{Name: colTestAccuracy, Type: arrow.PrimitiveTypes.Float64},
	}
	for _, name := range m.StatNames {
		fields = append(fields, arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64})
	}
	if m.HasParams {
		fields = append(fields, arrow.Field{Name: colParams, Type: float32List})
	}
	if m.HasUpload {
		fields = append(fields, arrow.Field{Name: colUpload, Type: float32List})
	}
	if m.Canaries > 0 {
		fields = append(fields, arrow.Field{Name: colCanaryIn, Type: boolList})
		for _, name := range m.CanaryStatNames {
			fields = append(fields, arrow.Field{Name: name, Type: float64List})
		}
	}
	return fields
}

// compactConfig checks that config is JSON and compacts it, so that two writers of the same
// config agree byte for byte. An empty config is allowed only when required is false.
func compactConfig(config []byte, required bool) ([]byte, error) {
	if len(bytes.TrimSpace(config)) == 0 {
		if required {
			return nil, errors.New("config is empty: run files must carry the experiment config")
		}
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, config); err != nil {
		return nil, fmt.Errorf("config is not valid JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// commonMeta reads the metadata keys shared by run and score files and checks the kind.
func commonMeta(sc *arrow.Schema, kind string) (config []byte, datasetHash, toolVersion string, err error) {
	md := sc.Metadata()
	get := func(key string) (string, error) {
		v, ok := md.GetValue(key)
		if !ok {
			return "", fmt.Errorf("missing schema metadata %q", key)
		}
		return v, nil
	}
	gotKind, err := get(KeyKind)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w (not written by fedaudit?)", err)
	}
	if gotKind != kind {
		return nil, "", "", fmt.Errorf("file holds %s, not %s", gotKind, kind)
	}
	v, err := get(KeyFormatVersion)
	if err != nil {
		return nil, "", "", err
	}
	if !knownFormatVersion(v) {
		return nil, "", "", fmt.Errorf("format version %q, this reader knows %q to %q", v, legacyFormatVersion, FormatVersion)
	}
	cfg, err := get(KeyConfig)
	if err != nil {
		return nil, "", "", err
	}
	if cfg != "" && !json.Valid([]byte(cfg)) {
		return nil, "", "", fmt.Errorf("metadata %q is not valid JSON", KeyConfig)
	}
	if datasetHash, err = get(KeyDatasetHash); err != nil {
		return nil, "", "", err
	}
	if toolVersion, err = get(KeyToolVersion); err != nil {
		return nil, "", "", err
	}
	if cfg != "" {
		config = []byte(cfg)
	}
	return config, datasetHash, toolVersion, nil
}

// runLayout is where each column of a run file sits in its schema.
type runLayout struct {
	fixed       [8]int // indices of run_id .. test_accuracy
	stats       []int
	params      int // -1 when absent
	upload      int // -1 when absent
	canaryIn    int // -1 when absent
	canaryStats []int
	canaries    int // k, from the metadata
}

// parseRunSchema checks a run file's schema and recovers its Meta and column layout. Columns are
// found by name, so a file rewritten by another tool with columns reordered still reads.
func parseRunSchema(sc *arrow.Schema) (Meta, runLayout, error) {
	var m Meta
	var err error
	m.Config, m.DatasetHash, m.ToolVersion, err = commonMeta(sc, KindRuns)
	if err != nil {
		return Meta{}, runLayout{}, err
	}
	if len(m.Config) == 0 {
		return Meta{}, runLayout{}, fmt.Errorf("metadata %q is empty", KeyConfig)
	}
	m.Version, _ = sc.Metadata().GetValue(KeyFormatVersion)
	shard, ok := sc.Metadata().GetValue(KeyShard)
	if !ok {
		return Meta{}, runLayout{}, fmt.Errorf("missing schema metadata %q", KeyShard)
	}
	if m.Shard, err = ParseShard(shard); err != nil {
		return Meta{}, runLayout{}, fmt.Errorf("metadata %q: %w", KeyShard, err)
	}

	want := []struct {
		name string
		typ  arrow.DataType
	}{
		{colRunID, arrow.PrimitiveTypes.Int64},
		{colPairID, arrow.PrimitiveTypes.Int64},
		{colWorld, arrow.PrimitiveTypes.Int8},
		{colSeed, arrow.PrimitiveTypes.Uint64},
		{colRound, arrow.PrimitiveTypes.Int32},
		{colDiverged, arrow.FixedWidthTypes.Boolean},
		{colTrainLoss, arrow.PrimitiveTypes.Float64},
		{colTestAccuracy, arrow.PrimitiveTypes.Float64},
	}
	lay := runLayout{params: -1, upload: -1, canaryIn: -1}
	for i := range lay.fixed {
		lay.fixed[i] = -1
	}
	seen := map[string]bool{}
	for i, f := range sc.Fields() {
		if seen[f.Name] {
			return Meta{}, runLayout{}, fmt.Errorf("duplicate column %q", f.Name)
		}
		seen[f.Name] = true
		fixed := false
		for j, w := range want {
			if f.Name == w.name {
				if !arrow.TypeEqual(f.Type, w.typ) {
					return Meta{}, runLayout{}, fmt.Errorf("column %q has type %s, want %s", f.Name, f.Type, w.typ)
				}
				lay.fixed[j] = i
				fixed = true
			}
		}
		switch {
		case fixed:
		case f.Name == colParams || f.Name == colUpload:
			lt, ok := f.Type.(*arrow.ListType)
			if !ok || lt.Elem().ID() != arrow.FLOAT32 {
				return Meta{}, runLayout{}, fmt.Errorf("column %q has type %s, want %s", f.Name, f.Type, float32List)
			}
			if f.Name == colParams {
				lay.params, m.HasParams = i, true
			} else {
				lay.upload, m.HasUpload = i, true
			}
		case f.Name == colCanaryIn:
			lt, ok := f.Type.(*arrow.ListType)
			if !ok || lt.Elem().ID() != arrow.BOOL {
				return Meta{}, runLayout{}, fmt.Errorf("column %q has type %s, want %s", f.Name, f.Type, boolList)
			}
			lay.canaryIn = i
		case f.Type.ID() == arrow.FLOAT64:
			lay.stats = append(lay.stats, i)
			m.StatNames = append(m.StatNames, f.Name)
		case f.Type.ID() == arrow.LIST && f.Type.(*arrow.ListType).Elem().ID() == arrow.FLOAT64:
			lay.canaryStats = append(lay.canaryStats, i)
			m.CanaryStatNames = append(m.CanaryStatNames, f.Name)
		default:
			return Meta{}, runLayout{}, fmt.Errorf("column %q has type %s; statistic columns must be float64 (or list<double> for canaries)", f.Name, f.Type)
		}
	}
	for j, idx := range lay.fixed {
		if idx < 0 {
			return Meta{}, runLayout{}, fmt.Errorf("missing required column %q", want[j].name)
		}
	}
	if k, ok := sc.Metadata().GetValue(KeyCanaries); ok {
		n, err := strconv.Atoi(k)
		if err != nil || n < 1 {
			return Meta{}, runLayout{}, fmt.Errorf("metadata %q: %q is not a positive count", KeyCanaries, k)
		}
		m.Canaries, lay.canaries = n, n
	}
	switch {
	case m.Canaries > 0 && lay.canaryIn < 0:
		return Meta{}, runLayout{}, fmt.Errorf("metadata declares %d canaries but there is no column %q", m.Canaries, colCanaryIn)
	case m.Canaries == 0 && (lay.canaryIn >= 0 || len(lay.canaryStats) > 0):
		return Meta{}, runLayout{}, fmt.Errorf("canary columns without metadata %q", KeyCanaries)
	}
	return m, lay, nil
}

// UploadAbsent reports whether a row's upload stands for "no upload" (the target did not take
// part in that round): empty, or, since a run file that declares uploads needs a vector in
// every row, filled with NaN (or zeros, which no trained and noised parameter vector is).
func UploadAbsent(up []float32) bool {
	nan, zero := true, true
	for _, v := range up {
		nan = nan && v != v
		zero = zero && v == 0
		if !nan && !zero {
			return false
		}
	}
	return true
}

// ImportOnly reports whether a statistic column is written by the importer alone, never by
// fedaudit's trainer (StatLLRDiff): an attack that needs it scores imported runs only.
func ImportOnly(stat string) bool { return stat == StatLLRDiff }
