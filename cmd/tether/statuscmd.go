package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tetherproxy/tether/internal/config"
	"github.com/tetherproxy/tether/internal/status"
)

// statusTimeout bounds `tether status`'s request: the admin server answers
// from memory.
const statusTimeout = 5 * time.Second

// runStatus is `tether status`: it fetches /status from the admin server of
// a running tether, at TETHER_ADMIN_LISTEN (its default when unset) or -addr,
// and prints it for a terminal, or as it came with -json.
func runStatus(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tether status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: tether status [-json] [-addr host:port]")
		fmt.Fprintln(fs.Output(), "Prints the sessions of a running tether, from /status on its admin server.")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "print the JSON document of /status as it is")
	addr := fs.String("addr", "", "the admin server (default: TETHER_ADMIN_LISTEN, or 127.0.0.1:9090)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &usageError{msg: "status: " + err.Error()}
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("status: unexpected argument %q", fs.Arg(0))}
	}
	target, err := statusTarget(*addr, env)
	if err != nil {
		return err
	}
	body, err := fetchStatus(ctx, target)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err = stdout.Write(body)
		return err
	}
	var doc status.Doc
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("status: %s answered something else than a status document: %w", target, err)
	}
	return status.Write(stdout, doc)
}

// statusTarget is the host:port to ask: -addr, else TETHER_ADMIN_LISTEN as
// tether reads it, else its default. An address that binds every interface
// is asked on loopback.
func statusTarget(flagAddr string, env map[string]string) (string, error) {
	name, raw := "-addr", flagAddr
	if raw == "" {
		name, raw = config.Prefix+"ADMIN_LISTEN", env[config.Prefix+"ADMIN_LISTEN"]
	}
	if raw == "" {
		raw = "127.0.0.1:9090" // TETHER_ADMIN_LISTEN's envDefault
	}
	var a config.AdminAddr
	if err := a.UnmarshalText([]byte(raw)); err != nil {
		return "", &usageError{msg: fmt.Sprintf("status: %s: %v", name, err)}
	}
	if a == "" {
		return "", &usageError{msg: fmt.Sprintf("status: %s is off: this tether serves no status (set -addr)", name)}
	}
	host, port, _ := net.SplitHostPort(string(a))
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}

func fetchStatus(ctx context.Context, target string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+target+"/status", nil)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true} // the admin server is local: never through a proxy
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("status: no tether admin server answered at %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("status: reading %s/status: %w", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status: %s/status answered %s: %s", target, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}
