//go:build linux

package wsconn

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpInfo reads the kernel's account of a TCP socket (TCP_INFO): the bytes
// the peer has acknowledged (Linux 4.1) and the bytes written but not sent
// yet (4.6). An older kernel fills in less and leaves both at zero, which
// reads as no progress.
type tcpInfo struct{ rc syscall.RawConn }

// newTCPInfo looks through TLS to the socket; rc stays nil when nc has no
// descriptor.
func newTCPInfo(nc net.Conn) tcpInfo {
	if t, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = t.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return tcpInfo{}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return tcpInfo{}
	}
	return tcpInfo{rc: rc}
}

// read returns the acknowledged and unsent byte counts; ok is false when
// the socket does not say (not TCP, closed).
func (t tcpInfo) read() (acked uint64, notSent uint32, ok bool) {
	if t.rc == nil {
		return 0, 0, false
	}
	var info *unix.TCPInfo
	var err error
	if cerr := t.rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); cerr != nil || err != nil {
		return 0, 0, false
	}
	return info.Bytes_acked, info.Notsent_bytes, true
}

// unread returns the bytes waiting in the receive queue (SIOCINQ), 0 when
// the socket does not say.
func (t tcpInfo) unread() int {
	if t.rc == nil {
		return 0
	}
	var n int
	var err error
	if cerr := t.rc.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}); cerr != nil || err != nil {
		return 0
	}
	return n
}

// sendQueue returns the bytes in the send queue (SIOCOUTQ): written and not
// yet acknowledged by the peer, sent or not; ok is false when the socket
// does not say.
func (t tcpInfo) sendQueue() (int, bool) {
	if t.rc == nil {
		return 0, false
	}
	var n int
	var err error
	if cerr := t.rc.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
	}); cerr != nil || err != nil {
		return 0, false
	}
	return n, true
}
