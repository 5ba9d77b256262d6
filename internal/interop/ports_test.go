package interop

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A broker the tests kill and start again must bind the same ports again
// (tether and the app keep its URL). A port taken with bind(0) is one of the
// kernel's ephemeral ports, which it also hands out as the local port of any
// outgoing connection on the machine: while the broker is down, the test
// binaries of the other packages (CI runs them all at once) can take it,
// and the restart fails with eaddrinuse (RabbitMQ's STOMP listener did,
// once in ten runs under load). Ports below that range are never handed out
// by the kernel, so only a program binding that very port could take one.

// portFloor is the lowest port restartPorts picks: above the registered
// ports most services listen on.
const portFloor = 20000

// defaultEphemeralLow is Linux's default start of the ephemeral range,
// assumed where /proc does not say.
const defaultEphemeralLow = 32768

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralLow
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\t")
	low, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return defaultEphemeralLow
	}
	return low
}

// freePorts returns n distinct loopback ports, each bindable now and
// outside the kernel's ephemeral range.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	low := ephemeralLow()
	if low-portFloor < 1000 {
		t.Fatalf("the ephemeral port range starts at %d: too few ports below it, above %d, for restartable brokers", low, portFloor)
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free loopback ports in [%d, %d) after %d tries", n, portFloor, low, tries)
		}
		port := portFloor + rand.IntN(low-portFloor)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use (or held by this loop already)
		}
		held = append(held, l)
		ports = append(ports, port)
	}
	return ports
}

// freePort is freePorts for one.
func freePort(t *testing.T) int {
	t.Helper()
	return freePorts(t, 1)[0]
}
