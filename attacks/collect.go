package attacks

import (
	"context"
	"fmt"
	"slices"

	"github.com/fedaudit/fedaudit/runs"
)

// keptColumns says which rounds' rows, parameters and uploads collect keeps: the rounds
// scored, the round before each for upload attacks (the model w_{T-1} the upload started
// from), and round 0 when w_0 comes from the file.
func keptColumns(rounds []int, needs Needs, initialFromFile bool) (keepRow, keepParams, keepUpload map[int32]bool) {
	keepRow, keepParams, keepUpload = map[int32]bool{}, map[int32]bool{}, map[int32]bool{}
	for _, t := range rounds {
		t := int32(t)
		keepRow[t] = true
		if needs.Params {
			keepParams[t] = true
		}
		if needs.Upload {
			keepUpload[t] = true
			keepRow[t-1], keepParams[t-1] = true, true
		}
	}
	if initialFromFile {
		keepRow[0], keepParams[0] = true, true
	}
	return keepRow, keepParams, keepUpload
}

// observations pairs the kept rows into what the attacks observe: rounds ascending, runs by
// id, each with the previous checkpoint (upload attacks) and round 0 (w_0 from the file) where
// needed.
func observations(store *runStore, rounds []int, upload, initialFromFile bool) ([]Observation, error) {
	var obs []Observation
	for _, t := range rounds {
		t := int32(t)
		for _, id := range store.ids {
			rr := store.rows[id]
			row, ok := rr[t]
			if !ok {
				continue
			}
			o := Observation{RunID: id, PairID: row.PairID, World: row.World, Round: t, Row: *row}
			if upload {
				if o.Prev = rr[t-1]; o.Prev == nil {
					return nil, fmt.Errorf("attacks: run %d has no checkpoint at round %d: upload attacks at round %d need the global model w_%d (add %d to checkpoints)", id, t-1, t, t-1, t-1)
				}
			}
			if initialFromFile {
				if o.Initial = rr[0]; o.Initial == nil {
					return nil, fmt.Errorf("attacks: run %d has no checkpoint at round 0 and Env.Initial is not given: attacks using w_0 need one of them", id)
				}
			}
			obs = append(obs, o)
		}
	}
	if len(obs) == 0 {
		return nil, fmt.Errorf("attacks: no run has a checkpoint at rounds %v", rounds)
	}
	return obs, nil
}

// runStore holds the kept rows of every run by round.
type runStore struct {
	ids  []int64
	rows map[int64]map[int32]*runs.Row
}

func collect(ctx context.Context, table *runs.Table, keepRow, keepParams, keepUpload map[int32]bool) (*runStore, error) {
	st := &runStore{rows: map[int64]map[int32]*runs.Row{}}
	pairs := map[int64][2]int64{} // run -> (pair, world)
	err := table.Scan(ctx, func(r runs.Row) error {
		if p, ok := pairs[r.RunID]; ok && (p[0] != r.PairID || p[1] != int64(r.World)) {
			return fmt.Errorf("run %d appears with pair %d world %d and with pair %d world %d", r.RunID, p[0], p[1], r.PairID, r.World)
		}
		pairs[r.RunID] = [2]int64{r.PairID, int64(r.World)}
		if !keepRow[r.Round] {
			return nil
		}
		if !keepParams[r.Round] {
			r.Params = nil
		}
		if !keepUpload[r.Round] {
			r.Upload = nil
		}
		m := st.rows[r.RunID]
		if m == nil {
			m = map[int32]*runs.Row{}
			st.rows[r.RunID] = m
			st.ids = append(st.ids, r.RunID)
		}
		if _, dup := m[r.Round]; dup {
			return fmt.Errorf("run %d has two rows at round %d", r.RunID, r.Round)
		}
		m[r.Round] = &r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("attacks: read %s: %w", table.Path(), err)
	}
	slices.Sort(st.ids)
	return st, nil
}
