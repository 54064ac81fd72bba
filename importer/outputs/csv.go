package outputs

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxCSVCells bounds what a CSV table may hold, so that a hostile file is refused before it
// exhausts memory (1000 pairs x 2 worlds x 100 records x 1000 classes fits).
const maxCSVCells = 1 << 28

// ReadCSV reads an outputs table from CSV with a header row (any column order). A logits
// column holds the logits of a row separated by spaces, commas or semicolons, optionally in
// brackets ("[0.1, 2.3, -1]", as pandas writes a list); or give them as columns logit_0,
// logit_1, ...
func ReadCSV(r io.Reader) (*Table, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = false
	cr.Comment = '#'
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, inputErrorf("empty CSV: no header row")
	}
	if err != nil {
		return nil, inputErrorf("CSV header: %v", err)
	}
	header[0] = strings.TrimPrefix(header[0], "\ufeff") // a UTF-8 byte-order mark from spreadsheets
	var rows [][]string
	cells := 0
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, inputErrorf("CSV: %v", err)
		}
		cells += len(rec)
		if cells > maxCSVCells {
			return nil, inputErrorf("CSV: more than %d cells", maxCSVCells)
		}
		rows = append(rows, rec)
	}
	cols := make([]column, len(header))
	for j, name := range header {
		j := j
		cell := func(i int) (string, bool) {
			s := strings.TrimSpace(rows[i][j])
			return s, s != ""
		}
		cols[j] = column{
			name: strings.TrimSpace(name),
			str: func(i int) (string, bool, error) {
				s, ok := cell(i)
				return s, ok, nil
			},
			num: func(i int) (float64, bool, error) {
				s, ok := cell(i)
				if !ok {
					return 0, false, nil
				}
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return 0, true, fmt.Errorf("%q is not a number", s)
				}
				return v, true, nil
			},
			list: func(i int) ([]float64, bool, error) {
				s, ok := cell(i)
				if !ok {
					return nil, false, nil
				}
				return parseList(s)
			},
		}
	}
	return build(cols, len(rows), "csv")
}

// parseList reads "[a, b, c]", "a;b;c" or "a b c".
func parseList(s string) ([]float64, bool, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
	if len(fields) > maxLogits {
		return nil, true, fmt.Errorf("more than %d logits", maxLogits)
	}
	out := make([]float64, len(fields))
	for k, f := range fields {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, true, fmt.Errorf("logit %d: %q is not a number", k, f)
		}
		out[k] = v
	}
	return out, true, nil
}
