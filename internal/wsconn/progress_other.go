//go:build !linux

package wsconn

import "net"

// tcpInfo is the kernel's account of a TCP socket on Linux
// (progress_linux.go). Elsewhere the system does not say what the peer has
// acknowledged, so write progress is never evidence of a live peer.
type tcpInfo struct{}

func newTCPInfo(net.Conn) tcpInfo { return tcpInfo{} }

func (tcpInfo) read() (acked uint64, notSent uint32, ok bool) { return 0, 0, false }

// unread is 0: the receive queue is not asked either, and a heartbeat
// decides on timestamps alone.
func (tcpInfo) unread() int { return 0 }

// sendQueue does not say: a heartbeat never takes the writer for behind.
func (tcpInfo) sendQueue() (int, bool) { return 0, false }
