package deploy

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// The image without a container engine: the binary built as the Dockerfile
// builds it runs as distroless would run it, in a root filesystem that holds
// nothing but /tether and a CA bundle, mounted read-only in a mount namespace
// of its own, as uid and gid 65532 (the image's USER). It shares the host's
// network namespace, so it reaches the test's loopback servers.
//
// The isolation is util-linux's unshare and mount and coreutils' chroot,
// which need root (CI runs as root). Where they are not permitted the test
// is skipped, saying why; with CI set it fails instead.

// imageUser is the image's numeric USER.
const imageUser = 65532

// caBundle is where distroless keeps its CA bundle, and where Go's
// crypto/x509 looks first on Linux.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// imageWait bounds what must happen promptly on loopback (start-up, an echo);
// it is only reached when the test fails.
const imageWait = 20 * time.Second

// testCA is a CA the test makes, and a server certificate for 127.0.0.1
// it signed.
type testCA struct {
	pem    []byte // the CA certificate, the bundle's only entry
	server *tls.Config
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey := newKey(t)
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "feed.test"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		server: &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}},
			MinVersion:   tls.VersionTLS12,
		},
	}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// emptyRoot lays out a root filesystem with only the binary and a CA
// bundle, owned by root and not writable by anyone else.
func emptyRoot(t *testing.T, bin string, bundle []byte) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	text, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{"/tether", text, 0o555}, {caBundle, bundle, 0o444}} {
		p := filepath.Join(root, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	// t.TempDir's directories are 0700: uid 65532 could not enter the root.
	if err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o755)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return root
}

// isolation runs a command in its own mount namespace, chrooted into a
// read-only bind mount of a root filesystem, as the image's user.
type isolation struct {
	unshare, sh, mount, chroot string
}

// isolationScript takes the paths of mount and chroot and a root, mounts
// the root read-only on itself, then runs the rest of its arguments
// chrooted into it as the image's user. unshare --mount makes the mounts
// private: nothing leaks to the host's namespace, and they vanish with the
// process. Every step execs, so the pid the test started ends as tether's.
// The tools' paths are arguments, not variables, and the shell's own PWD is
// unset, so that tether's environment holds nothing but what the test
// gives it.
var isolationScript = `set -e
unset PWD OLDPWD
mount=$1 chroot=$2 root=$3
shift 3
"$mount" --bind "$root" "$root"
"$mount" -o remount,bind,ro "$root"
exec "$chroot" --userspec=` + fmt.Sprintf("%d:%d", imageUser, imageUser) + ` "$root" "$@"`

// requireIsolation finds the tools and checks that the isolation is
// permitted here, by running it once around a command that does nothing.
func requireIsolation(t *testing.T) isolation {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") != "" {
			t.Fatalf("%s, and CI is set: CI must run the image in an empty root filesystem", msg)
		}
		reason := msg + "; the image tests need root (or CAP_SYS_ADMIN and CAP_SYS_CHROOT), util-linux and coreutils"
		skipped.Add(reason)
		t.Skip(reason)
	}
	if runtime.GOOS != "linux" {
		unavailable("mount namespaces and chroot are Linux's, this is %s", runtime.GOOS)
	}
	var iso isolation
	for _, tool := range []struct {
		name string
		path *string
	}{{"unshare", &iso.unshare}, {"sh", &iso.sh}, {"mount", &iso.mount}, {"chroot", &iso.chroot}} {
		p, err := exec.LookPath(tool.name)
		if err != nil {
			unavailable("%s not found: %v", tool.name, err)
		}
		*tool.path = p
	}
	// The same steps around a command that exists: the empty root has
	// none, so the probe chroots into the host's / to run true.
	truePath, err := exec.LookPath("true")
	if err != nil {
		unavailable("true not found: %v", err)
	}
	probe := t.TempDir()
	if err := os.Chmod(probe, 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.Replace(isolationScript, `"$root" "$@"`, `/ "$@"`, 1)
	out, err := iso.command(script, probe, truePath).CombinedOutput()
	if err != nil {
		unavailable("a mount namespace with a read-only bind mount and chroot as uid %d are not permitted here (%v: %s)",
			imageUser, err, strings.TrimSpace(string(out)))
	}
	return iso
}

// command returns the isolation around argv, run in root.
func (iso isolation) command(script, root string, argv ...string) *exec.Cmd {
	args := append([]string{"--mount", "--propagation", "private", iso.sh, "-c", script, "sh", iso.mount, iso.chroot, root}, argv...)
	cmd := exec.Command(iso.unshare, args...)
	// A container's environment: no PATH, no HOME, only what the test sets.
	cmd.Env = []string{}
	return cmd
}

// imageProcess is tether running in the empty root.
type imageProcess struct {
	cmd       *exec.Cmd
	listen    string // the app listener's address
	admin     string // the admin server's address
	mu        sync.Mutex
	log       []string // stderr lines
	done      chan struct{}
	exitErr   error
	readerEnd sync.WaitGroup
}

// startImage runs /tether in root with env (TETHER_* only: a container has
// nothing else) and waits for it to log both of its addresses.
func startImage(t *testing.T, iso isolation, root string, env map[string]string) *imageProcess {
	t.Helper()
	cmd := iso.command(isolationScript, root, "/tether")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start tether in the empty root: %v", err)
	}
	p := &imageProcess{cmd: cmd, done: make(chan struct{})}
	addrs := make(chan [2]string, 1)
	p.readerEnd.Add(1)
	go p.readLog(stderr, addrs)
	go func() {
		p.readerEnd.Wait() // Wait closes the pipe: read it all first
		p.exitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill() // its own pid: the test's child
			<-p.done
		}
		if t.Failed() {
			t.Logf("tether's log in the empty root:\n%s", p.logText())
		}
	})
	select {
	case a := <-addrs:
		p.listen, p.admin = a[0], a[1]
	case <-p.done:
		t.Fatalf("tether exited in the empty root: %v\n%s", p.exitErr, p.logText())
	case <-time.After(imageWait):
		t.Fatalf("tether did not start within %v:\n%s", imageWait, p.logText())
	}
	return p
}

// readLog keeps tether's JSON log lines and reports the addresses from
// "admin server listening" and "tether started".
func (p *imageProcess) readLog(r io.Reader, addrs chan<- [2]string) {
	defer p.readerEnd.Done()
	var admin string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		p.mu.Lock()
		p.log = append(p.log, sc.Text())
		p.mu.Unlock()
		var entry struct {
			Msg    string `json:"msg"`
			Addr   string `json:"addr"`
			Listen string `json:"listen"`
		}
		if json.Unmarshal(sc.Bytes(), &entry) != nil {
			continue
		}
		switch entry.Msg {
		case "admin server listening":
			admin = entry.Addr
		case "tether started":
			addrs <- [2]string{entry.Listen, admin}
		}
	}
}

func (p *imageProcess) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.log, "\n")
}

func (p *imageProcess) logged(msg string) bool {
	return strings.Contains(p.logText(), `"msg":"`+msg+`"`)
}

// stop sends SIGTERM, as the kubelet does, and returns tether's exit.
func (p *imageProcess) stop(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.done:
		return p.exitErr
	case <-time.After(imageWait):
		t.Fatalf("tether still running %v after SIGTERM", imageWait)
		return nil
	}
}

// TestImageInEmptyRoot runs the image's binary in an empty read-only root
// as uid 65532 against a TLS upstream that only the bundle's CA verifies.
func TestImageInEmptyRoot(t *testing.T) {
	iso := requireIsolation(t)
	bin := buildImageBinary(t, t.TempDir())
	checkImageBinary(t, bin)
	ca := newTestCA(t, "tether image test CA")
	up, err := upstreamtest.NewServer(upstreamtest.Options{TLS: ca.server, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })

	root := emptyRoot(t, bin, ca.pem)
	t.Run("version", func(t *testing.T) {
		out, err := iso.command(isolationScript, root, "/tether", "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "tether "+imageVersion) {
			t.Errorf("/tether version in the empty root = %q, %v; want it to start with \"tether %s\" (-X main.version)", out, err, imageVersion)
		}
	})
	p := startImage(t, iso, root, map[string]string{
		"TETHER_UPSTREAM_URL":     up.URL(),
		"TETHER_UPSTREAM_CA_FILE": caBundle,
		"TETHER_LISTEN":           "127.0.0.1:0",
		"TETHER_ADMIN_LISTEN":     "127.0.0.1:0",
		"TETHER_DRAIN_TIMEOUT":    "1s",
	})
	checkConfinement(t, p.cmd.Process.Pid)
	if code, body := httpGet(t, "http://"+p.admin+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	const msg = "through the image, verified by the bundle's CA"
	if got := echo(t, "ws://"+p.listen+"/", msg); got != msg {
		t.Errorf("the app got %q back, want %q", got, msg)
	}
	if up.Handshakes() < 1 {
		t.Error("the upstream accepted no connection")
	}
	if err := p.stop(t); err != nil {
		t.Errorf("tether exited with %v after SIGTERM, want 0", err)
	}
	if !p.logged("stopped") {
		t.Error("tether did not log \"stopped\" after SIGTERM")
	}
}

// TestImageRefusesAnotherCA is the control: the same root with a bundle of
// another CA must not reach the upstream, so the test above proves the
// bundle verified the upstream rather than nothing being verified.
func TestImageRefusesAnotherCA(t *testing.T) {
	iso := requireIsolation(t)
	bin := buildImageBinary(t, t.TempDir())
	served, other := newTestCA(t, "the upstream's CA"), newTestCA(t, "another CA")
	up, err := upstreamtest.NewServer(upstreamtest.Options{TLS: served.server, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	p := startImage(t, iso, emptyRoot(t, bin, other.pem), map[string]string{
		"TETHER_UPSTREAM_URL":     up.URL(),
		"TETHER_UPSTREAM_CA_FILE": caBundle,
		"TETHER_LISTEN":           "127.0.0.1:0",
		"TETHER_ADMIN_LISTEN":     "127.0.0.1:0",
		"TETHER_DRAIN_TIMEOUT":    "1s",
	})
	ctx, cancel := context.WithTimeout(context.Background(), imageWait)
	defer cancel()
	conn, _, _, err := ws.Dialer{}.Dial(ctx, "ws://"+p.listen+"/")
	var se ws.StatusError
	switch {
	case err == nil:
		_ = conn.Close()
		t.Error("the app was accepted although the upstream's certificate is not signed by the bundle's CA")
	case !errors.As(err, &se) || int(se) != http.StatusBadGateway:
		t.Errorf("app handshake: %v, want HTTP 502 (a certificate that does not verify is permanent)", err)
	}
	if n := up.Handshakes(); n != 0 {
		t.Errorf("the upstream read %d WebSocket handshake requests from a tether that did not verify it", n)
	}
	if err := p.stop(t); err != nil {
		t.Errorf("tether exited with %v after SIGTERM, want 0", err)
	}
}

// checkConfinement reads, from the host's /proc, that the process runs as
// the image's user without capabilities, with only TETHER_* variables, and
// with a read-only root.
func checkConfinement(t *testing.T, pid int) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d\t%d\t%d\t%d", imageUser, imageUser, imageUser, imageUser)
	for _, field := range []string{"Uid:", "Gid:"} {
		if line := procField(string(status), field); line != want {
			t.Errorf("%s %q, want real, effective, saved and fs ids %d", field, line, imageUser)
		}
	}
	if line := procField(string(status), "CapEff:"); strings.Trim(line, "0") != "" {
		t.Errorf("effective capabilities %s, want none", line)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00") {
		if !strings.HasPrefix(kv, "TETHER_") {
			t.Errorf("tether's environment holds %q: a container's holds only what its spec sets", kv)
		}
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	if opts, ok := rootMountOptions(string(mounts)); !ok || !strings.HasPrefix(opts, "ro") {
		t.Errorf("the process's / is mounted with %q, want ro", opts)
	}
}

// procField returns the value of a "Name:\tvalue" line of /proc/pid/status.
func procField(status, name string) string {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, name); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// rootMountOptions finds the mount a process sees at "/" in its mountinfo
// (fields: id, parent, major:minor, root, mount point, options, …) and
// returns its per-mount options.
func rootMountOptions(mountinfo string) (string, bool) {
	for _, l := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && f[4] == "/" {
			return f[5], true
		}
	}
	return "", false
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: imageWait}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// echo sends msg as an app and returns the first message it gets back.
func echo(t *testing.T, url, msg string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), imageWait)
	defer cancel()
	conn, br, _, err := ws.Dialer{}.Dial(ctx, url)
	if err != nil {
		t.Fatalf("app dial %s: %v", url, err)
	}
	defer conn.Close()
	if br != nil {
		ws.PutReader(br)
	}
	_ = conn.SetDeadline(time.Now().Add(imageWait))
	if err := wsutil.WriteClientText(conn, []byte(msg)); err != nil {
		t.Fatalf("app send: %v", err)
	}
	got, err := wsutil.ReadServerText(conn)
	if err != nil {
		t.Fatalf("app read: %v", err)
	}
	return string(got)
}
