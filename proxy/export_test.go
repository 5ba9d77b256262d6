package proxy

// AppQueuedBytes reports, for each session whose app socket is open, the bytes
// of upstream messages queued towards the app, so tests can check that a slow
// app costs at most DownstreamBufferBytes.
func (s *Server) AppQueuedBytes() []int64 {
	var out []int64
	for _, sess := range s.snapshot() {
		select {
		case <-sess.appReady: // orders the read of sess.app after its write
			out = append(out, sess.app.Queued())
		default:
		}
	}
	return out
}
