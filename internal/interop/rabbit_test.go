package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Debian's rabbitmq-server keeps its scripts in rabbitBin; the wrappers in
// /usr/sbin switch to the rabbitmq user through su, which starts a new
// session, so the test runs the scripts itself: as the rabbitmq user
// through setpriv when it is root (CI), as itself otherwise. Either way the
// broker is in the test's process group, and stopped by it.
const (
	rabbitBin     = "/usr/lib/rabbitmq/bin"
	rabbitInstall = "apt-get install -y rabbitmq-server"
	// rabbitStartWait bounds a RabbitMQ start: an Erlang VM booting the
	// broker and its plugins takes seconds, tens of them on a CI machine
	// busy building the other packages' test binaries.
	rabbitStartWait = 120 * time.Second
	// rabbitctlWait bounds one rabbitmqctl command (an Erlang VM too).
	rabbitctlWait = 60 * time.Second
)

type rabbitTools struct {
	server, ctl, epmd string
	setpriv           []string // the command prefix that runs as the rabbitmq user; nil when not root
	uid, gid          int
}

var rabbitOnce = sync.OnceValues(func() (rabbitTools, error) {
	rt := rabbitTools{server: filepath.Join(rabbitBin, "rabbitmq-server"), ctl: filepath.Join(rabbitBin, "rabbitmqctl"), uid: -1, gid: -1}
	for _, f := range []string{rt.server, rt.ctl} {
		if _, err := os.Stat(f); err != nil {
			return rt, err
		}
	}
	epmd, err := exec.LookPath("epmd")
	if err != nil {
		return rt, err
	}
	rt.epmd = epmd
	if os.Geteuid() != 0 {
		return rt, nil
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return rt, err
	}
	u, err := user.Lookup("rabbitmq")
	if err != nil {
		return rt, err
	}
	rt.uid, _ = strconv.Atoi(u.Uid)
	rt.gid, _ = strconv.Atoi(u.Gid)
	rt.setpriv = []string{setpriv, "--reuid=rabbitmq", "--regid=rabbitmq", "--init-groups"}
	return rt, nil
})

// rabbit is one RabbitMQ node with the Web STOMP plugin: its own node
// name, loopback ports, data, log and configuration directory, and its own
// epmd (the Erlang port mapper, which would otherwise start as a daemon
// outside the test's process group).
type rabbit struct {
	tools    rabbitTools
	dir      string
	node     string
	webStomp int // the Web STOMP port: ws://127.0.0.1:webStomp/ws
	env      []string
	proc     *proc
}

// newRabbit prepares a node and its epmd, and starts the node.
func newRabbit(t *testing.T, tools rabbitTools) *rabbit {
	t.Helper()
	dir, err := os.MkdirTemp("", "tether-rabbit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := freePorts(t, 5) // AMQP, STOMP, Web STOMP, distribution, epmd
	r := &rabbit{tools: tools, dir: dir, node: fmt.Sprintf("tether-%d@localhost", os.Getpid()), webStomp: p[2]}
	conf := fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nstomp.listeners.tcp.1 = 127.0.0.1:%d\n"+
		"web_stomp.tcp.ip = 127.0.0.1\nweb_stomp.tcp.port = %d\n", p[0], p[1], p[2])
	files := map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[rabbitmq_web_stomp].\n"}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"home", "mnesia", "log"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if tools.uid >= 0 {
		err := filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chown(path, tools.uid, tools.gid)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	r.env = []string{
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=" + filepath.Join(dir, "home"), // the Erlang cookie, shared with rabbitmqctl
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_EPMD_PORT=" + strconv.Itoa(p[4]),
		"RABBITMQ_NODENAME=" + r.node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(p[0]),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(p[3]),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_LOGS=-", // to stdout, which the test follows
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
	}
	epmd := r.command(tools.epmd, "-d", "-port", strconv.Itoa(p[4]), "-address", "127.0.0.1")
	e := startProc(t, "epmd", epmd, true)
	awaitLine(t, e, startWait, "epmd running")
	r.start(t)
	return r
}

// command runs name as the rabbitmq user (when the test is root) with the
// node's environment.
func (r *rabbit) command(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string(nil), r.tools.setpriv...), name), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = r.env, r.dir
	return cmd
}

// start starts the node and waits until it serves.
func (r *rabbit) start(t *testing.T) {
	t.Helper()
	r.proc = startProc(t, "rabbitmq", r.command(r.tools.server), false)
	awaitLine(t, r.proc, rabbitStartWait, "Server startup complete")
}

// kill ends the node with SIGKILL, its process group with it.
func (r *rabbit) kill() { r.proc.kill() }

// ctl runs rabbitmqctl against the node, in a process group of its own
// that is killed if it outlives rabbitctlWait.
func (r *rabbit) ctl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rabbitctlWait)
	defer cancel()
	argv := append(append(append([]string(nil), r.tools.setpriv...), r.tools.ctl, "-n", r.node), args...)
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env, c.Dir = r.env, r.dir
	own(c)
	c.Cancel = func() error { killGroup(c); return nil }
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// url is the Web STOMP endpoint.
func (r *rabbit) url() string { return fmt.Sprintf("ws://127.0.0.1:%d/ws", r.webStomp) }

// awaitLine reads p's followed stream up to a line containing s.
func awaitLine(t *testing.T, p *proc, wait time.Duration, s string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if strings.Contains(string(p.nextLine(t, time.Until(deadline), fmt.Sprintf("%q", s))), s) {
			return
		}
	}
}
