package importer

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fedaudit/fedaudit/runs"
)

// Entry is one snapshot of a manifest: the global model of one run after Round rounds.
type Entry struct {
	// File is the snapshot's path, relative to the manifest's directory unless absolute.
	File string `json:"file"`
	// World is 0 for C and 1 for C'; manifests write "C", "C'" (or "Cprime"), 0 or 1.
	World int8 `json:"-"`
	// Pair is the coupled pair: both worlds of a pair share their noise.
	Pair int `json:"pair"`
	// Round is the number of rounds trained; 0 is the initial model w_0.
	Round int `json:"round"`
	// Client, when not -1, marks client Client's upload in round Round (the noisy model, or
	// update with Options.UploadUpdates, it sent the server, computed from w_{Round-1})
	// instead of a global model. Only the target client's uploads are audited (the uploads
	// observer); other clients' are counted and skipped.
	Client int `json:"-"`
	// Canary, when set, says whether the run's training data held the canary: a check of the
	// world labels against fedaudit's convention (Expect.CanaryInC): true exactly in C' (in C
	// for the remove adjacencies, where C holds the differing record).
	Canary *bool `json:"canary,omitempty"`
	// Diverged, when true on a global model's row, says the trainer declared the run diverged by
	// that round (its loss or parameters blew up, so it kept earlier parameters): the imported
	// run keeps the flag, so the analysis judges such runs as `audit run` does (a note, or
	// INCONCLUSIVE when most diverged). audit export writes it; other trainers may.
	Diverged bool `json:"diverged,omitempty"`
	// Line is where the entry was declared (CSV line or JSON index), for messages.
	Line string `json:"-"`
}

// Manifest lists the snapshots of an import.
type Manifest struct {
	Path    string
	Entries []Entry
}

// jsonKind names a Go kind as JSON writes it.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "another value"
}

// jsonEntry is an entry as JSON writes it: world as a string or number, client optional.
type jsonEntry struct {
	File     string          `json:"file"`
	World    json.RawMessage `json:"world"`
	Pair     *int            `json:"pair"`
	Round    *int            `json:"round"`
	Client   *int            `json:"client"`
	Canary   *bool           `json:"canary"`
	Diverged *bool           `json:"diverged"`
}

// ReadManifest reads a manifest: JSON (an array of entries, or an object with "entries") when
// the file starts with '[' or '{', else CSV with a header row naming at least file, world, pair
// and round (client and canary optional; any order; other columns are an error, so a typo is
// never silently ignored).
//
// A manifest over maxManifestBytes is refused before it is read (a million snapshots take about
// 60 MB).
func ReadManifest(path string) (*Manifest, error) {
	// A file that cannot be read stays an fs.PathError (the CLI's exit status 1, as for any
	// input file), named "manifest PATH: no such file or directory", not "stat PATH: ...".
	st, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &fs.PathError{Op: "manifest", Path: path, Err: err}
	}
	if st.IsDir() {
		return nil, &fs.PathError{Op: "manifest", Path: path, Err: syscall.EISDIR}
	}
	if st.Size() > maxManifestBytes {
		return nil, fmt.Errorf("manifest %s: %d bytes, more than the %d a manifest may have", path, st.Size(), maxManifestBytes)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	entries, err := parseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range entries {
		if !filepath.IsAbs(entries[i].File) {
			entries[i].File = filepath.Join(dir, entries[i].File)
		}
	}
	return &Manifest{Path: path, Entries: entries}, nil
}

// maxManifestBytes caps the size of a manifest file.
const maxManifestBytes = 1 << 30

// parseManifest parses a manifest's bytes: JSON when they start with '[' or '{', else CSV.
func parseManifest(raw []byte) ([]Entry, error) {
	raw = bytes.TrimPrefix(raw, []byte("\ufeff")) // a UTF-8 byte-order mark (spreadsheets, Windows editors)
	if t := bytes.TrimSpace(raw); len(t) > 0 && (t[0] == '[' || t[0] == '{') {
		return parseJSON(t)
	}
	return parseCSV(raw)
}

func parseJSON(raw []byte) ([]Entry, error) {
	var list []json.RawMessage
	if raw[0] == '{' {
		var obj struct {
			Entries []json.RawMessage `json:"entries"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil {
			return nil, err
		}
		if _, err := dec.Token(); err != io.EOF {
			// Decode reads one value: a second object after it would be dropped with its entries.
			return nil, fmt.Errorf("text after the manifest's object at byte %d", dec.InputOffset())
		}
		list = obj.Entries
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, errors.New("no entries")
	}
	out := make([]Entry, 0, len(list))
	var probs problems // every bad entry, not just the first
	for i, m := range list {
		where := fmt.Sprintf("entry %d", i)
		var je jsonEntry
		dec := json.NewDecoder(bytes.NewReader(m))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&je); err != nil {
			// "field pair: a string where a number belongs", not "json: cannot unmarshal
			// string into Go struct field jsonEntry.pair of type int".
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				probs.add("%s: field %s: a %s where %s belongs", where, te.Field, te.Value, jsonKind(te.Type.Kind()))
			} else {
				probs.add("%s: %v", where, err)
			}
			continue
		}
		if je.File == "" || je.World == nil || je.Pair == nil || je.Round == nil {
			probs.add("%s: file, world, pair and round are required", where)
			continue
		}
		var ws string
		if json.Unmarshal(je.World, &ws) != nil {
			ws = string(je.World) // a number
		}
		w, err := runs.ParseWorld(ws)
		if err != nil {
			probs.add("%s: %v", where, err)
			continue
		}
		e := Entry{File: je.File, World: w, Pair: *je.Pair, Round: *je.Round, Client: -1, Canary: je.Canary, Line: where}
		if je.Diverged != nil {
			e.Diverged = *je.Diverged
		}
		if je.Client != nil {
			if *je.Client < 0 {
				probs.add("%s: client %d is negative (leave it out for a global model)", where, *je.Client)
				continue
			}
			e.Client = *je.Client
		}
		out = append(out, e)
	}
	if err := probs.err("entries"); err != nil {
		return nil, err
	}
	return out, nil
}

var csvColumns = []string{"file", "world", "pair", "round", "client", "canary", "diverged"}

func parseCSV(raw []byte) ([]Entry, error) {
	r := csv.NewReader(bytes.NewReader(raw))
	r.TrimLeadingSpace = true
	header, err := r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("empty: a CSV manifest starts with a header naming its columns (%s; file, world, pair and round required)", strings.Join(csvColumns, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "pair_id" {
			h = "pair"
		}
		if !slices.Contains(csvColumns, h) {
			return nil, fmt.Errorf("header: unknown column %q (want %s)", header[i], strings.Join(csvColumns, ", "))
		}
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("header: column %q given twice", h)
		}
		col[h] = i
	}
	for _, need := range csvColumns[:4] {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("header: missing column %q (need file, world, pair, round)", need)
		}
	}
	var out []Entry
	var probs problems // every bad row, not just the first
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if errors.Is(err, csv.ErrFieldCount) {
			probs.add("%v", err) // names its line; the next rows read as usual
			continue
		}
		if err != nil {
			// A csv.ParseError names its line; the rows after a syntax error cannot be trusted.
			probs.add("%v", err)
			break
		}
		line, _ := r.FieldPos(0)
		where := fmt.Sprintf("line %d", line)
		if bad := parseRow(rec, col, where, &out); bad != "" {
			probs.add("%s", bad)
		}
	}
	if err := probs.err("rows"); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no entries")
	}
	return out, nil
}

// parseRow parses one CSV row into an entry appended to out, or returns what is wrong with it.
func parseRow(rec []string, col map[string]int, where string, out *[]Entry) string {
	e := Entry{File: strings.TrimSpace(rec[col["file"]]), Client: -1, Line: where}
	if e.File == "" {
		return fmt.Sprintf("%s: empty file", where)
	}
	var err error
	if e.World, err = runs.ParseWorld(rec[col["world"]]); err != nil {
		return fmt.Sprintf("%s: %v", where, err)
	}
	ints := []struct {
		name     string
		dst      *int
		required bool
	}{{"pair", &e.Pair, true}, {"round", &e.Round, true}, {"client", &e.Client, false}}
	for _, f := range ints {
		i, ok := col[f.name]
		if !ok {
			continue
		}
		if strings.TrimSpace(rec[i]) == "" {
			if f.required {
				// An empty cell read as 0 would list the row as pair 0 or w_0, as the JSON
				// manifest refuses an absent pair or round.
				return fmt.Sprintf("%s: empty %s (file, world, pair and round are required)", where, f.name)
			}
			continue
		}
		v, err := strconv.Atoi(strings.TrimSpace(rec[i]))
		if err != nil {
			return fmt.Sprintf("%s: %s %q is not an integer", where, f.name, rec[i])
		}
		if f.name == "client" && v < 0 {
			return fmt.Sprintf("%s: client %d is negative (leave it empty for a global model)", where, v)
		}
		*f.dst = v
	}
	if i, ok := col["canary"]; ok && strings.TrimSpace(rec[i]) != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(rec[i]))
		if err != nil {
			return fmt.Sprintf("%s: canary %q: want true/false or 1/0", where, rec[i])
		}
		e.Canary = &b
	}
	if i, ok := col["diverged"]; ok && strings.TrimSpace(rec[i]) != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(rec[i]))
		if err != nil {
			return fmt.Sprintf("%s: diverged %q: want true/false or 1/0", where, rec[i])
		}
		e.Diverged = b
	}
	*out = append(*out, e)
	return ""
}

// Expect is what a manifest is checked against: the experiment's pairs and checkpoints, and for
// uploads its clients.
type Expect struct {
	Pairs  int
	Rounds []int // the checkpoints, sorted and distinct
	// Clients is the number of clients; TargetClient the one holding the canary, whose uploads
	// the uploads observer sees.
	Clients, TargetClient int
	// Partial is set when only some clients take part in a round (partial participation): the
	// target's upload may then be missing at a round, in both worlds of a pair together (they
	// share their participation draws).
	Partial bool
	// CanaryInC says which world a manifest's canary column must mark: false (the default,
	// adjacency replace, add and replace-client) for C', where fedaudit puts the canary; true
	// for the remove adjacencies, whose differing record (or client) C holds and C' lacks.
	// Adjacency is the config's kind, for messages.
	CanaryInC bool
	Adjacency string
}

// Plan is a validated manifest: for pairs 0..Pairs-1, both worlds and every round, the
// snapshot file.
type Plan struct {
	Pairs  int
	Rounds []int
	// Files[pair][world][i] is the global model's snapshot at round Rounds[i].
	Files [][2][]string
	// Uploads[pair][world][i] is the target client's upload in round Rounds[i] (the one that
	// made w_{Rounds[i]}); "" at round 0 and where the client sat the round out. Nil when the
	// manifest lists no upload of the target client.
	Uploads [][2][]string
	// OtherUploads counts the manifest's uploads of other clients, which no attack reads.
	OtherUploads int
	// Diverged[pair][world][i] says the run was declared diverged by round Rounds[i] (the
	// manifest's diverged column, kept from that round on).
	Diverged [][2][]bool
}

// Validate checks the manifest against the experiment and returns every problem found, one per
// line (the first maxListed, and a count of the rest).
func (m *Manifest) Validate(ex Expect) (*Plan, error) {
	plan, probs := m.validate(ex)
	if err := probs.err("manifest " + m.Path); err != nil {
		return nil, err
	}
	return plan, nil
}

// validate is Validate returning the plan of what the manifest lists, complete or not ("" where
// a snapshot is missing), and the problems found.
func (m *Manifest) validate(ex Expect) (*Plan, *problems) {
	pairs, rounds := ex.Pairs, ex.Rounds
	probs := &problems{}
	add := probs.add
	type key struct {
		pair   int
		world  int8
		round  int
		upload bool
	}
	seen := map[key]string{}
	// A file names one run's snapshot at a round after 0: two runs listing it would be audited as
	// two independent trainings (round 0 may share one, w_0 being public and the same for all).
	type fileKey struct {
		round  int
		upload bool
		file   string
	}
	type fileUse struct {
		pair  int
		world int8
		line  string
	}
	files := map[fileKey][]fileUse{}
	var fileOrder []fileKey
	canaryWorld := runs.WorldCPrime
	if ex.CanaryInC {
		canaryWorld = runs.WorldC
	}
	var wrongCanary [2][]string // per world, the lines whose canary value contradicts the convention
	grid := func() [][2][]string {
		g := make([][2][]string, pairs)
		for p := range g {
			for w := range 2 {
				g[p][w] = make([]string, len(rounds))
			}
		}
		return g
	}
	plan := &Plan{Pairs: pairs, Rounds: slices.Clone(rounds), Files: grid()}
	for _, e := range m.Entries {
		if e.Canary != nil && *e.Canary != (e.World == canaryWorld) {
			wrongCanary[e.World] = append(wrongCanary[e.World], e.Line)
		}
		upload := e.Client >= 0
		if upload && e.Client >= ex.Clients {
			add("%s: client %d outside 0..%d (the config has %d clients)", e.Line, e.Client, ex.Clients-1, ex.Clients)
			continue
		}
		if upload && e.Client != ex.TargetClient {
			plan.OtherUploads++
			continue
		}
		if e.Pair < 0 || e.Pair >= pairs {
			add("%s: pair %d outside 0..%d (the config declares %d pairs)", e.Line, e.Pair, pairs-1, pairs)
			continue
		}
		ri := slices.Index(rounds, e.Round)
		if ri < 0 {
			add("%s: round %d is not a checkpoint of the config %v", e.Line, e.Round, rounds)
			continue
		}
		if upload && e.Round == 0 {
			add("%s: an upload at round 0: uploads are numbered by the round they made (1 is the first)", e.Line)
			continue
		}
		k := key{e.Pair, e.World, e.Round, upload}
		if prev, dup := seen[k]; dup {
			what := ""
			if upload {
				what = "upload of "
			}
			add("%s: %spair %d world %s round %d is listed twice (also %s)", e.Line, what, e.Pair, runs.WorldName(e.World), e.Round, prev)
			continue
		}
		seen[k] = e.Line
		if e.Round > 0 {
			fk := fileKey{e.Round, upload, filepath.Clean(e.File)}
			if files[fk] == nil {
				fileOrder = append(fileOrder, fk)
			}
			files[fk] = append(files[fk], fileUse{e.Pair, e.World, e.Line})
		}
		if upload {
			if plan.Uploads == nil {
				plan.Uploads = grid()
			}
			plan.Uploads[e.Pair][e.World][ri] = e.File
		} else {
			plan.Files[e.Pair][e.World][ri] = e.File
			if e.Diverged {
				if plan.Diverged == nil {
					plan.Diverged = make([][2][]bool, pairs)
					for p := range plan.Diverged {
						for w := range 2 {
							plan.Diverged[p][w] = make([]bool, len(rounds))
						}
					}
				}
				// A run stays diverged: the trainer keeps the flag from the round it is set.
				for i := ri; i < len(rounds); i++ {
					plan.Diverged[e.Pair][e.World][i] = true
				}
			}
		}
	}
	for _, fk := range fileOrder {
		if uses := files[fk]; len(uses) > 1 {
			what, more := "", ""
			if fk.upload {
				what = "the upload of "
			}
			if len(uses) > 2 {
				more = fmt.Sprintf(" (and %d more runs)", len(uses)-2)
			}
			a, b := uses[0], uses[1]
			add("%s and %s: %spair %d world %s and pair %d world %s at round %d are one file, %s%s: no two runs hold the same model after a noisy round, and copies would be audited as independent trainings; give each run its own file (names that lack the pair or the world make each run overwrite the one before)",
				a.line, b.line, what, a.pair, runs.WorldName(a.world), b.pair, runs.WorldName(b.world), fk.round, fk.file, more)
		}
	}
	canaryProblems(wrongCanary, canaryWorld, ex, add)
	for p := range plan.Files {
		for w := range 2 {
			for i, f := range plan.Files[p][w] {
				if f == "" {
					add("pair %d world %s round %d: no snapshot (each pair needs both worlds at every checkpoint %v)", p, runs.WorldName(int8(w)), rounds[i], rounds)
				}
			}
		}
	}
	if plan.Uploads != nil {
		validateUploads(plan, ex, add)
	}
	return plan, probs
}

// canaryProblems reports the manifest rows whose canary value contradicts the convention
// (wrong[w]: the lines of world w): one problem when both worlds do (the labels look swapped),
// else one for the world that does, each naming its first line and counting the others.
func canaryProblems(wrong [2][]string, canaryWorld int8, ex Expect, add func(string, ...any)) {
	if c, cp := wrong[runs.WorldC], wrong[runs.WorldCPrime]; len(c) > 0 && len(cp) > 0 {
		add("%s: canary %v in world C and %s: canary %v in world C' (%d rows of C and %d of C' say so), but %s. The world labels look swapped (relabel C as C' and C' as C), or the canary column is wrong; imported as they stand, every score would be read backwards",
			c[0], canaryWorld != runs.WorldC, cp[0], canaryWorld != runs.WorldCPrime, len(c), len(cp), ex.canaryConvention())
		return
	}
	for w, lines := range wrong {
		if len(lines) == 0 {
			continue
		}
		world := int8(w)
		more := ""
		if len(lines) > 1 {
			more = fmt.Sprintf(" (and %d more rows of world %s)", len(lines)-1, runs.WorldName(world))
		}
		add("%s: canary %v in world %s%s, but %s. Either the canary column is wrong or the world labels are (then swap C and C'); imported as they stand, every score would be read backwards",
			lines[0], world != canaryWorld, runs.WorldName(world), more, ex.canaryConvention())
	}
}

// canaryConvention says which world holds the canary under ex, for messages.
func (ex Expect) canaryConvention() string {
	if ex.CanaryInC {
		return fmt.Sprintf("under adjacency %s the differing record is in C (C' lacks it), so canary is true in C and false in C'", ex.Adjacency)
	}
	adj := ex.Adjacency
	if adj == "" {
		adj = "replace"
	}
	return fmt.Sprintf("fedaudit's canary is in C' (adjacency %s: C holds the client's own data, C' the canary), so canary is false in C and true in C'", adj)
}

// validateUploads checks the target client's uploads: every checkpoint T >= 1 needs them in
// both worlds of every pair (or, with partial participation, in neither), and the global model
// w_{T-1} they started from, which the upload attacks subtract.
func validateUploads(plan *Plan, ex Expect, add func(string, ...any)) {
	for i, t := range ex.Rounds {
		if t == 0 {
			continue
		}
		if !slices.Contains(ex.Rounds, t-1) {
			add("uploads at round %d need the global model w_%d they started from: add %d to the checkpoints", t, t-1, t-1)
		}
		for p := range plan.Uploads {
			c, cp := plan.Uploads[p][0][i], plan.Uploads[p][1][i]
			switch {
			case c != "" && cp != "":
			case c == "" && cp == "" && ex.Partial:
				// the target client sat round t out in this pair (both worlds share the draw)
			case c == "" && cp == "":
				add("pair %d round %d: no upload of the target client %d (every client takes part in every round; uploads are needed at every checkpoint after 0)", p, t, ex.TargetClient)
			default:
				w := runs.WorldC
				if c != "" {
					w = runs.WorldCPrime
				}
				add("pair %d round %d: the target client's upload is missing in world %s only (both worlds of a pair share which clients take part)", p, t, runs.WorldName(w))
			}
		}
	}
}
