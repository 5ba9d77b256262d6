package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/centrifugal/centrifuge"
)

// The Centrifuge server of the centrifuge preset's tests: a real server
// built on the centrifuge Go library (its Node, WebSocket handler and
// memory broker, which keeps each channel's history with an epoch of its
// own), run as a process of its own by this test binary re-executed with
// cfServerEnv set, so that a restart with a new broker is a new process
// and nothing of it outlives the test.
//
// It listens on 127.0.0.1 (argv: the port, 0 for a free one; the server
// ping interval), publishes {"n":i} with history to the channel "news"
// every cfPublishEvery, and prints JSON lines: {"event":"listening","port":N},
// {"event":"connect"} for each connection, {"event":"subscribe",...} for
// each subscribe with what it asked to recover. Commands on stdin:
// {"cmd":"drop","ms":N} disconnects every client (3001 shutdown) and
// refuses connections for N ms, history kept; {"cmd":"unsubscribe"} ends
// every client's subscription to "news" from the server's side. It exits
// when stdin closes.
const cfServerEnv = "TETHER_INTEROP_CENTRIFUGE_SERVER"

const cfPublishEvery = 20 * time.Millisecond

// cfServerFromEnv runs the server as cfServerEnv ("port,ping") says.
func cfServerFromEnv(v string) int {
	ports, pings, _ := strings.Cut(v, ",")
	port, err1 := strconv.Atoi(ports)
	ping, err2 := time.ParseDuration(pings)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", cfServerEnv, v, err)
		return 2
	}
	return cfServerMain(port, ping)
}

// cfServerMain runs the server; it returns the process's exit code.
func cfServerMain(port int, ping time.Duration) int {
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	print := func(v map[string]any) { mu.Lock(); _ = out.Encode(v); mu.Unlock() }
	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelDebug, LogHandler: func(e centrifuge.LogEntry) {
		if explainsDisconnect(e) {
			print(map[string]any{"event": "server-log", "message": e.Message, "fields": e.Fields})
		}
	}})
	if err != nil {
		print(map[string]any{"event": "server-error", "message": err.Error()})
		return 1
	}
	broker, err := centrifuge.NewMemoryBroker(node, centrifuge.MemoryBrokerConfig{})
	if err != nil {
		print(map[string]any{"event": "server-error", "message": err.Error()})
		return 1
	}
	node.SetBroker(broker)
	node.OnConnecting(func(context.Context, centrifuge.ConnectEvent) (centrifuge.ConnectReply, error) {
		return centrifuge.ConnectReply{Credentials: &centrifuge.Credentials{UserID: "app"}}, nil
	})
	node.OnConnect(func(c *centrifuge.Client) {
		print(map[string]any{"event": "connect"})
		c.OnSubscribe(func(e centrifuge.SubscribeEvent, cb centrifuge.SubscribeCallback) {
			print(map[string]any{"event": "subscribe", "channel": e.Channel})
			cb(centrifuge.SubscribeReply{Options: centrifuge.SubscribeOptions{EnableRecovery: true}}, nil)
		})
	})
	if err := node.Run(); err != nil {
		print(map[string]any{"event": "server-error", "message": err.Error()})
		return 1
	}
	ws := centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{
		CheckOrigin:    func(*http.Request) bool { return true },
		PingPongConfig: centrifuge.PingPongConfig{PingInterval: ping, PongTimeout: ping / 2},
	})
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		print(map[string]any{"event": "server-error", "message": err.Error()})
		return 1
	}
	port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: ws, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	print(map[string]any{"event": "listening", "port": port})

	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(cfPublishEvery)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if _, err := node.Publish("news", []byte(`{"n":`+strconv.Itoa(n)+`}`), centrifuge.WithHistory(10000, 10*time.Minute)); err != nil {
				print(map[string]any{"event": "server-error", "message": err.Error()})
			}
		}
	}()

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var cmd struct {
			Cmd string `json:"cmd"`
			MS  int    `json:"ms"`
		}
		if json.Unmarshal(in.Bytes(), &cmd) != nil {
			continue
		}
		switch cmd.Cmd {
		case "drop":
			srv, err = dropFor(srv, ws, node, port, time.Duration(cmd.MS)*time.Millisecond)
			if err != nil {
				print(map[string]any{"event": "server-error", "message": err.Error()})
				return 1
			}
			print(map[string]any{"event": "listening", "port": port})
		case "unsubscribe":
			if err := node.Unsubscribe("app", "news"); err != nil {
				print(map[string]any{"event": "server-error", "message": err.Error()})
			}
		}
	}
	close(stop)
	_ = srv.Close()
	return 0
}

// explainsDisconnect picks the log entries that say why the server ended
// a connection (at debug level the library says so for each, "closing
// client connection" with the reason, and names a pong it never asked
// for), and those at info and above, for the log of a failed test; the
// rest of the debug level (every subscribe, connect, upgrade) is left out.
func explainsDisconnect(e centrifuge.LogEntry) bool {
	return e.Level >= centrifuge.LogLevelInfo || strings.Contains(e.Message, "closing") ||
		strings.Contains(e.Message, "disconnect") || strings.Contains(e.Message, "unexpected")
}

// dropFor closes the listener and every client connection, waits d, and
// listens on port again with the same node: a server restart that keeps
// its history and epoch, as a Centrifugo node on a persistent broker.
func dropFor(srv *http.Server, ws http.Handler, node *centrifuge.Node, port int, d time.Duration) (*http.Server, error) {
	_ = srv.Close()
	for _, c := range node.Hub().Connections() {
		c.Disconnect(centrifuge.DisconnectShutdown)
	}
	time.Sleep(d) // the outage itself: a separate process, the test's bound is its own
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, errors.Join(errors.New("listen again"), err)
	}
	srv = &http.Server{Handler: ws, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}
