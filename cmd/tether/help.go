package main

import (
	"io"
	"strings"

	"github.com/tetherproxy/tether/internal/config"
)

// writeHelp prints the usage line and every variable with its default.
func writeHelp(w io.Writer) {
	var b strings.Builder
	b.WriteString("usage: tether [demo|service|status|version|--help]\n\n")
	b.WriteString("tether keeps a resilient upstream WebSocket or Server-Sent Events connection on behalf of a local app.\n")
	b.WriteString("It is configured only through environment variables:\n\n")
	config.WriteVariables(&b)
	b.WriteString(statusHelp)
	_, _ = io.WriteString(w, b.String())
}

// statusHelp introduces the one command that is not the sidecar itself.
const statusHelp = `
tether status prints the sessions of a running tether, from /status on its admin server (TETHER_ADMIN_LISTEN);
-json prints the document itself, -addr host:port asks another address.
`
