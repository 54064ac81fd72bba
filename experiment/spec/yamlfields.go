package spec

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/fedaudit/fedaudit/internal/suggest"
)

// unknownField is the YAML decoder's message for a field its target type lacks.
var unknownField = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)

// decodeError says what the YAML decoder refused in the config's own terms: an unknown field by
// its YAML path (train.local_step), with the field it was probably meant to be, or else the
// fields its section takes; the decoder named Go types instead ("field local_step not found
// in type train.Config").
func decodeError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("decode: %w", err)
	}
	sections := yamlSections()
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = m
		g := unknownField.FindStringSubmatch(m)
		if g == nil {
			continue
		}
		s, ok := sections[g[3]]
		if !ok {
			continue
		}
		path, in := g[2], "at the top level"
		if len(s.paths) > 0 && s.paths[0] != "" {
			// A type at several places (canary.Gradient: adjacency.gradient and
			// train.gradient_canary) is named at each: the decoder gives no path.
			var at []string
			for _, sp := range s.paths {
				at = append(at, sp+"."+g[2])
			}
			path, in = strings.Join(at, " or "), "in "+strings.Join(s.paths, " or ")
		}
		msgs[i] = fmt.Sprintf("line %s: %s: unknown field", g[1], path)
		if best := suggest.Closest(g[2], s.fields, 3); best != "" {
			msgs[i] += fmt.Sprintf(" (did you mean %s?)", best)
		} else {
			msgs[i] += fmt.Sprintf("; the fields %s are %s", in, strings.Join(s.fields, ", "))
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// section is where a struct type sits in the config (every place, in the order found) and the
// YAML fields it takes.
type section struct {
	paths  []string
	fields []string
}

// yamlSections maps the Go types of the config's sections (as reflect names them, as the YAML
// decoder's messages do: "train.Config") to their YAML path and fields; the first path found
// for a type shared by several sections.
var yamlSections = sync.OnceValue(func() map[string]section {
	out := map[string]section{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		if s, seen := out[t.String()]; seen {
			if !slices.Contains(s.paths, path) {
				s.paths = append(s.paths, path)
				out[t.String()] = s
			}
			return
		}
		s := section{paths: []string{path}}
		out[t.String()] = s
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			s.fields = append(s.fields, name)
			sub := name
			if path != "" {
				sub = path + "." + name
			}
			walk(f.Type, sub)
		}
		s.paths = out[t.String()].paths // with any place the walk below it found
		out[t.String()] = s
	}
	walk(reflect.TypeOf(Config{}), "")
	return out
})
