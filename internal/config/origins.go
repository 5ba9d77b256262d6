package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tetherproxy/tether/internal/browser"
)

// originList holds TETHER_ALLOWED_ORIGINS: origins normalised by
// browser.NormalizeOrigin, or the single entry browser.AnyOrigin.
type originList []string

// UnmarshalText parses comma-separated origins. Each must be
// scheme://host[:port] exactly as a browser sends it in Origin, without a
// path: "http://localhost:3000/" would never match, so it is refused here
// rather than silently refusing the page. Blank entries are ignored.
func (o *originList) UnmarshalText(text []byte) error {
	var out originList
	for i, entry := range strings.Split(string(text), ",") {
		entry = strings.TrimSpace(entry)
		switch {
		case entry == "":
			continue
		case entry == browser.AnyOrigin:
			out = append(out, entry)
			continue
		}
		n, err := browser.NormalizeOrigin(entry)
		if err != nil {
			return fmt.Errorf("entry %d %q: %w", i+1, entry, err)
		}
		out = append(out, n)
	}
	if len(out) > 1 && slices.Contains(out, browser.AnyOrigin) {
		return errors.New(`"*" allows every origin and must be the only entry`)
	}
	*o = out
	return nil
}

// AllowsAny reports TETHER_ALLOWED_ORIGINS=*.
func (o originList) AllowsAny() bool {
	return len(o) == 1 && o[0] == browser.AnyOrigin
}
