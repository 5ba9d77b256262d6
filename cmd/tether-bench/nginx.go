package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// findNginx returns the nginx binary: the -nginx flag, else nginx on PATH, else
// the Debian location.
func findNginx(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", fmt.Errorf("nginx: %w (apt-get install nginx-light)", errNotFound)
}

// nginxVersion is the first line of nginx -v ("nginx version: nginx/1.22.1").
func nginxVersion(bin string) string {
	out, _ := exec.Command(bin, "-v").CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

var tempPathRE = regexp.MustCompile(`--http-([a-z-]+)-temp-path=`)

// nginxTempDirectives lists the *_temp_path directives the binary was built
// with (nginx -V): each compiled-in default points to a system directory the
// benchmark must not need, and naming a module that is not built in would be an
// unknown directive.
func nginxTempDirectives(bin string) []string {
	out, _ := exec.Command(bin, "-V").CombinedOutput()
	var names []string
	for _, m := range tempPathRE.FindAllStringSubmatch(string(out), -1) {
		names = append(names, strings.ReplaceAll(m[1], "-", "_")+"_temp_path")
	}
	return names
}

// nginxConf is what the configuration depends on.
type nginxConf struct {
	dir         string   // prefix: pid, logs, temp files
	feed        string   // host:port of the feed
	plain       string   // listen address with the standard settings
	buffered    string   // listen address with enlarged buffers
	temps       []string // *_temp_path directives to point into dir
	user        string   // "name group" when running as root, else ""
	connections int      // worker_connections
	noFile      uint64   // worker_rlimit_nofile
}

// wsProxy is the standard WebSocket reverse-proxy configuration (nginx's
// documentation, "WebSocket proxying"): HTTP/1.1 upstream, the Upgrade and
// Connection headers passed on, and timeouts long enough for a quiet feed.
const wsProxy = `            proxy_pass http://%s;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
`

// render returns nginx.conf: one worker, no daemon, everything in dir, a
// server per variant.
func (c nginxConf) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by tether-bench\nworker_processes 1;\ndaemon off;\npid %s;\n", filepath.Join(c.dir, "nginx.pid"))
	fmt.Fprintf(&b, "error_log %s warn;\n", filepath.Join(c.dir, "error.log"))
	if c.user != "" {
		fmt.Fprintf(&b, "user %s;\n", c.user)
	}
	fmt.Fprintf(&b, "worker_rlimit_nofile %d;\nevents {\n    worker_connections %d;\n}\n", c.noFile, c.connections)
	b.WriteString("http {\n    access_log off;\n")
	for _, t := range c.temps {
		fmt.Fprintf(&b, "    %s %s;\n", t, filepath.Join(c.dir, strings.TrimSuffix(t, "_temp_path")))
	}
	b.WriteString("    map $http_upgrade $connection_upgrade {\n        default upgrade;\n        '' close;\n    }\n")
	fmt.Fprintf(&b, "    server {\n        listen %s;\n        location / {\n", c.plain)
	fmt.Fprintf(&b, wsProxy, c.feed)
	b.WriteString("        }\n    }\n")
	fmt.Fprintf(&b, "    server {\n        listen %s;\n        location / {\n", c.buffered)
	fmt.Fprintf(&b, wsProxy, c.feed)
	b.WriteString("            proxy_buffer_size 64k;\n            proxy_buffers 8 64k;\n        }\n    }\n}\n")
	return b.String()
}

// currentUser is the user and group nginx's worker runs as when the tool runs
// as root (nginx would switch to nobody otherwise, who cannot write the
// temporary directory). Without root, nginx ignores the directive and runs as
// the current user anyway.
func currentUser() string {
	if os.Geteuid() != 0 {
		return ""
	}
	u, err := user.Current()
	if err != nil {
		return ""
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		return u.Username
	}
	return u.Username + " " + g.Name
}

// nginxProc is a running nginx (master and one worker).
type nginxProc struct {
	*process
	plain, buffered string
	version         string
}

func startNginx(ctx context.Context, bin, dir, name, feedAddr string, connections int) (*nginxProc, error) {
	dir = filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	plain, err := freeAddr()
	if err != nil {
		return nil, err
	}
	buffered, err := freeAddr()
	if err != nil {
		return nil, err
	}
	conf := nginxConf{dir: dir, feed: feedAddr, plain: plain, buffered: buffered,
		temps: nginxTempDirectives(bin), user: currentUser(), connections: connections,
		noFile: min(hardNoFile(), uint64(connections)+64)}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf.render()), 0o644); err != nil {
		return nil, err
	}
	args := []string{"-p", dir + "/", "-c", path}
	if help, _ := exec.Command(bin, "-h").CombinedOutput(); strings.Contains(string(help), "-e filename") {
		args = append(args, "-e", filepath.Join(dir, "error.log"))
	}
	p, err := startProcess(name, exec.Command(bin, args...), filepath.Join(dir, "stderr.log"))
	if err != nil {
		return nil, err
	}
	if err := p.waitListening(ctx, 10*time.Second, plain, buffered); err != nil {
		_ = p.stop()
		return nil, err
	}
	return &nginxProc{process: p, plain: plain, buffered: buffered, version: nginxVersion(bin)}, nil
}

// pids are the master and its worker: CPU and memory count both.
func (n *nginxProc) pids() []int { return append([]int{n.pid()}, childPIDs(n.pid())...) }
