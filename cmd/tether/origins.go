package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/tetherproxy/tether/proxy"
)

// originList holds TETHER_ALLOWED_ORIGINS: origins normalised by
// proxy.NormalizeOrigin, or the single entry proxy.AnyOrigin.
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
		case entry == proxy.AnyOrigin:
			out = append(out, entry)
			continue
		}
		n, err := proxy.NormalizeOrigin(entry)
		if err != nil {
			return fmt.Errorf("entry %d %q: %w", i+1, entry, err)
		}
		out = append(out, n)
	}
	if len(out) > 1 && slices.Contains(out, proxy.AnyOrigin) {
		return errors.New(`"*" allows every origin and must be the only entry`)
	}
	*o = out
	return nil
}

// allowsAny reports TETHER_ALLOWED_ORIGINS=*.
func (o originList) allowsAny() bool {
	return len(o) == 1 && o[0] == proxy.AnyOrigin
}

// allowedHosts is the Host name the app listener accepts besides loopback
// names and the IP address a connection arrived on: the host of
// TETHER_LISTEN when it is a name (an IP address is covered already; a
// wildcard address names nothing).
func (l listenAddr) allowedHosts() []string {
	host, _, err := net.SplitHostPort(string(l))
	if err != nil || host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	return []string{host}
}
