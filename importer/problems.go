package importer

import (
	"fmt"
	"strings"
)

// maxListed is how many problems an error message lists; the rest are counted.
const maxListed = 20

// problems collects every problem a check finds, so that one pass reports them all; the message
// lists the first maxListed and counts the rest.
type problems struct {
	list []string
}

func (p *problems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *problems) len() int { return len(p.list) }

// err is nil without problems, else one error whose first line is head (with the count of
// problems when there are several) and whose other lines are the problems.
func (p *problems) err(head string) error {
	n := len(p.list)
	if n == 0 {
		return nil
	}
	shown := p.list[:min(n, maxListed)]
	var b strings.Builder
	b.WriteString(head)
	if n > 1 {
		fmt.Fprintf(&b, " (%d problems)", n)
	}
	b.WriteString(":\n  ")
	b.WriteString(strings.Join(shown, "\n  "))
	if n > len(shown) {
		fmt.Fprintf(&b, "\n  ... and %d more problems", n-len(shown))
	}
	return fmt.Errorf("%s", b.String())
}
