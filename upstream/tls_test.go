package upstream_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/tetherproxy/tether/upstream"
	"github.com/tetherproxy/tether/upstream/upstreamtest"
)

// selfSigned returns a certificate for 127.0.0.1 that is its own root, and a
// pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tether test upstream"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// tlsFront terminates TLS on 127.0.0.1:0 and forwards the plaintext to
// target, as a TLS-offloading load balancer in front of the upstream would.
type tlsFront struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func newTLSFront(t *testing.T, cert tls.Certificate, target string) *tlsFront {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	f := &tlsFront{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *tlsFront) url() string { return "wss://" + f.ln.Addr().String() + "/" }

func (f *tlsFront) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		f.wg.Add(1)
		go f.forward(c)
	}
}

// forward pipes one connection to the target until either side ends.
func (f *tlsFront) forward(client net.Conn) {
	defer f.wg.Done()
	server, err := net.Dial("tcp", f.target)
	if err != nil || !f.track(client, server) {
		_ = client.Close()
		if server != nil {
			_ = server.Close()
		}
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	_ = client.Close()
	_ = server.Close()
	<-done
	f.untrack(client, server)
}

func (f *tlsFront) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *tlsFront) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		delete(f.conns, c)
	}
}

func (f *tlsFront) close() {
	f.once.Do(func() {
		_ = f.ln.Close()
		f.mu.Lock()
		for c := range f.conns {
			_ = c.Close()
		}
		f.conns = nil
		f.mu.Unlock()
		f.wg.Wait()
	})
}

// TestTLS: wss:// with the configured roots connects and carries messages; a
// certificate that does not verify is a permanent first-dial failure.
func TestTLS(t *testing.T) {
	cert, roots := selfSigned(t)
	srv := newServer(t, upstreamtest.Options{Subprotocols: []string{"v1"}}) // echo
	front := newTLSFront(t, cert, srv.Addr())

	t.Run("trusted", func(t *testing.T) {
		h := newHandler()
		h.restore = func(ctx context.Context, c *upstream.Conn) error { return c.SendText(ctx, []byte("over tls")) }
		opts := testOptions(t, front.url(), h)
		opts.TLSConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		opts.Protocols = []string{"v1"}
		c := startClient(t, opts)

		if first := recv(t, c.First(), "first dial result"); first.Err != nil || first.Protocol != "v1" {
			t.Fatalf("First() = %+v, want connected with protocol v1", first)
		}
		if m := h.nextMessage(t); m.data != "over tls" || m.op != ws.OpText {
			t.Errorf("Message(%v, %q), want the echo of \"over tls\"", m.op, m.data)
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		opts := testOptions(t, front.url(), newHandler())
		opts.TLSConfig = &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
		c := startClient(t, opts)

		first := recv(t, c.First(), "first dial result")
		var unknown x509.UnknownAuthorityError
		if !first.Permanent || !errors.As(first.Err, &unknown) {
			t.Fatalf("First() = %+v, want permanent, unknown authority", first)
		}
		waitClosed(t, c.Done(), "Client stop")
		if err := c.Err(); !errors.Is(err, upstream.ErrPermanent) {
			t.Errorf("Err() = %v, want ErrPermanent", err)
		}
	})
}
