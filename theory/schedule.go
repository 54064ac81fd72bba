package theory

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Schedule gives the learning rate eta_{k,t} of local step k (0-based, k < K) in round t
// (0-based). The bound takes any schedule; the four of Theorem 3 have closed forms or named
// constants in the paper, and a TableSchedule carries what a deployed system used (warm-up,
// cosine, ...).
type Schedule interface {
	Eta(k, t int) float64
}

// ConstantSchedule is eta_{k,t} = Base (Theorem 3a).
type ConstantSchedule struct{ Base float64 }

// Eta implements Schedule.
func (s ConstantSchedule) Eta(k, t int) float64 { return s.Base }

// CyclicSchedule is eta_{k,t} = Base/(k+1): decaying within a round and restarting each
// round (Theorem 3b).
type CyclicSchedule struct{ Base float64 }

// Eta implements Schedule.
func (s CyclicSchedule) Eta(k, t int) float64 { return s.Base / float64(k+1) }

// StageSchedule is eta_{k,t} = Base/(t+1): constant within a round, decaying once per round
// (Theorem 3c).
type StageSchedule struct{ Base float64 }

// Eta implements Schedule.
func (s StageSchedule) Eta(k, t int) float64 { return s.Base / float64(t+1) }

// IterativeSchedule is eta_{k,t} = Base/(tK+k+1): decaying with every local step across
// rounds (Theorem 3d). K is the number of local steps per round.
type IterativeSchedule struct {
	Base float64
	K    int
}

// Eta implements Schedule.
func (s IterativeSchedule) Eta(k, t int) float64 {
	return s.Base / (float64(t)*float64(s.K) + float64(k) + 1)
}

// roundInvariant reports that eta_{k,t} does not depend on t, so the per-round coefficients
// rho_t, gamma_t need computing once rather than T times.
func (ConstantSchedule) roundInvariant() bool { return true }
func (CyclicSchedule) roundInvariant() bool   { return true }

// TableSchedule is an explicit table eta_{k,t}; build it with NewTableSchedule or
// ReadScheduleTable. Outside the table Eta returns NaN, which the bound reports as an error.
type TableSchedule struct {
	rows [][]float64 // [t][k]
}

// NewTableSchedule makes a schedule from rows[t][k] = eta_{k,t}: one row per round, every row
// with the same number of local steps, every rate finite and not negative (a step of rate 0, a
// warm-up from 0 or a frozen round, moves nothing: rho 1, gamma 0; DP-SGD without an L bounds
// its other examples' drift from a round's second step on whatever the rates, looser but still
// a bound). The table is copied.
func NewTableSchedule(rows [][]float64) (*TableSchedule, error) {
	if len(rows) == 0 {
		return nil, errors.New("schedule table: no rounds")
	}
	steps := len(rows[0])
	if steps == 0 {
		return nil, errors.New("schedule table: round 0 has no steps")
	}
	cp := make([][]float64, len(rows))
	for t, row := range rows {
		if len(row) != steps {
			return nil, fmt.Errorf("schedule table: round %d has %d steps, round 0 has %d", t, len(row), steps)
		}
		for k, eta := range row {
			if !(eta >= 0) || math.IsInf(eta, 0) {
				return nil, fmt.Errorf("schedule table: eta at round %d, step %d is %v; rates must be finite and not negative", t, k, eta)
			}
		}
		cp[t] = append([]float64(nil), row...)
	}
	return &TableSchedule{rows: cp}, nil
}

// Eta implements Schedule.
func (s *TableSchedule) Eta(k, t int) float64 {
	if t < 0 || t >= len(s.rows) || k < 0 || k >= len(s.rows[t]) {
		return math.NaN()
	}
	return s.rows[t][k]
}

// Size is the number of rounds and of local steps per round the table covers.
func (s *TableSchedule) Size() (rounds, steps int) {
	return len(s.rows), len(s.rows[0])
}

// maxScheduleTableCells bounds what ReadScheduleTable accepts, so a wrong file (a data set,
// a run file) fails with a message instead of exhausting memory.
const maxScheduleTableCells = 1 << 26

// ReadScheduleTable reads a schedule table as CSV: one line per round t, K comma-separated
// rates eta_{0,t}, ..., eta_{K-1,t}. Lines starting with '#' and blank lines are skipped;
// spaces around numbers are allowed.
func ReadScheduleTable(r io.Reader) (*TableSchedule, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	cr.FieldsPerRecord = -1 // checked below, with a clearer message
	cr.ReuseRecord = true
	var rows [][]float64
	cells := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("schedule table: %w", err)
		}
		line, _ := cr.FieldPos(0)
		row := make([]float64, len(rec))
		for k, field := range rec {
			v, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
			if err != nil {
				return nil, fmt.Errorf("schedule table: line %d, column %d: %q is not a number", line, k+1, field)
			}
			row[k] = v
		}
		if cells += len(row); cells > maxScheduleTableCells {
			return nil, fmt.Errorf("schedule table: more than %d rates", maxScheduleTableCells)
		}
		rows = append(rows, row)
	}
	return NewTableSchedule(rows)
}

// scheduleNames are the names ParseSchedule accepts.
var scheduleNames = []string{"constant", "cyclic", "stage", "iterative"}

// ParseSchedule makes one of the schedules of Theorem 3 from its name: "constant", "cyclic",
// "stage" (stage-wise; "stagewise" and "stage-wise" are accepted too) or "iterative", with base
// rate eta and K local steps per round.
func ParseSchedule(name string, eta float64, K int) (Schedule, error) {
	if !(eta > 0) || math.IsInf(eta, 0) {
		return nil, fmt.Errorf("schedule %q: eta must be positive and finite, got %v", name, eta)
	}
	switch strings.ToLower(name) {
	case "constant":
		return ConstantSchedule{Base: eta}, nil
	case "cyclic":
		return CyclicSchedule{Base: eta}, nil
	case "stage", "stagewise", "stage-wise":
		return StageSchedule{Base: eta}, nil
	case "iterative":
		if K < 1 {
			return nil, fmt.Errorf("schedule %q: K must be >= 1, got %d", name, K)
		}
		return IterativeSchedule{Base: eta, K: K}, nil
	}
	return nil, fmt.Errorf("unknown schedule %q (want one of %s)", name, strings.Join(scheduleNames, ", "))
}

// scheduleName is a short label for a schedule in messages and tables.
func scheduleName(s Schedule) string {
	switch s := s.(type) {
	case ConstantSchedule:
		return "constant"
	case CyclicSchedule:
		return "cyclic"
	case StageSchedule:
		return "stage"
	case IterativeSchedule:
		return "iterative"
	case *TableSchedule:
		r, k := s.Size()
		return fmt.Sprintf("table(%dx%d)", r, k)
	}
	return fmt.Sprintf("%T", s)
}
