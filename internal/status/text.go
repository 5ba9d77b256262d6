package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tetherproxy/tether/internal/config"
)

// Write prints the document as a table, one line per session, then
// each session's recent events, newest first.
func Write(w io.Writer, doc Doc) error {
	v := pageOf(doc)
	draining := ""
	if doc.Draining {
		draining = " · DRAINING"
	}
	memory := ""
	if m := doc.Memory; m != nil {
		memory = fmt.Sprintf(" · memory %s of %s", config.ByteSize(m.UsedBytes), config.ByteSize(m.LimitBytes))
		if p := m.Pressure(); p != "" {
			memory = " · " + strings.ToUpper(p)
		}
	}
	fmt.Fprintf(w, "tether %s · %s upstream · %d of at most %d sessions%s%s · %s\n\n",
		doc.Version, doc.UpstreamKind, len(v.Rows), doc.MaxSessions, draining, memory, doc.Now.Format(time.RFC3339))
	if len(v.Rows) == 0 {
		_, err := fmt.Fprintln(w, "No app is connected.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tLISTENER\tSTATE\tATTEMPT\tNEXT RETRY\tDOWN FOR\tLAST CLOSE\tLAST FAILURE\tOUTBOX\tRECONNECTS\tGAPS")
	for _, r := range v.Rows {
		state := r.State
		if r.GaveUp != "" {
			state += " (gave up: " + r.GaveUp + ")"
		}
		fmt.Fprintf(tw, "#%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d msg, %d B\t%d\t%s\n", r.ID, r.Listener, state, r.Attempt,
			dash(r.NextIn), orText(r.Down, "up"), dash(r.LastClose), dash(r.Failure), r.OutboxMessages, r.OutboxBytes,
			r.Reconnects, dash(r.Gaps))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range v.Rows {
		fmt.Fprintf(w, "\n#%d %s, %s old\n", r.ID, r.Upstream, r.Age)
		for _, e := range r.Events {
			line := fmt.Sprintf("  %8s ago  %-11s %s", e.Ago, e.Event, e.Detail)
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
	return nil
}

func dash(s string) string { return orText(s, "-") }

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
