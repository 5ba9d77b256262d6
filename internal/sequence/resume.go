package sequence

import (
	"strings"

	"go.uber.org/zap"

	"github.com/tetherproxy/tether/internal/template"
)

// Resume is one rendered TETHER_RESUME_MESSAGE: a new connection's request
// for everything after LastSeq in Stream ("" for the unnamed stream).
type Resume struct {
	Stream  string
	LastSeq int64
	Message []byte
}

// ResumeMessages returns the resume messages for new connection gen, to be
// sent right after the login (docs/design.md "Restoring the application",
// step 2), and records each stream as asked for on gen: a gap of that
// stream is then left to the resumed replay for half the timeout before it
// is fetched, and the first message gen delivers in it counts as a recovery
// by resume. Without Config.Resume, or with nothing to resume (resumeData),
// there is none.
//
// A message that fails to render is logged and left out rather than failing
// the connection: rendering would fail on every connection, and the gap
// timeout and the catch-up still protect the stream.
func (s *Sequencer) ResumeMessages(gen uint64) []Resume {
	if !s.cfg.Resume.IsSet() {
		return nil
	}
	s.mu.Lock()
	data := s.resumeDataLocked(gen)
	s.mu.Unlock()
	out := make([]Resume, 0, len(data))
	for _, d := range data {
		msg, err := s.cfg.Resume.Render(d)
		if err != nil {
			s.log.Error("resume message not rendered, not sent", zap.Uint64("gen", gen),
				zap.String("stream", d.Stream), zap.Error(err))
			continue
		}
		out = append(out, Resume{Stream: d.Stream, LastSeq: d.LastSeq, Message: msg})
	}
	return out
}

// Lost tells the Sequencer that connection gen ended: a resume sent on it
// will not be answered any more, so the gaps left to it are fetched now,
// and the duplicates not reported yet are.
func (s *Sequencer) Lost(gen uint64) {
	b := &batch{}
	s.mu.Lock()
	for stream, g := range s.resumed {
		if g != gen {
			continue
		}
		delete(s.resumed, stream)
		if gt := s.gaps[stream]; gt != nil && gt.deferred && !s.closed && !s.failed {
			s.undeferLocked(b, gt)
		}
	}
	if n := s.dups.take(s.clock.Now()); n > 0 {
		b.event(event{kind: evDuplicates, n: n})
	}
	s.mu.Unlock()
	// Fetches and log lines only: no message is released, and without the
	// turn the App is not this goroutine's to call.
	s.startFetches(b)
	s.emit(b)
}

// captureLocked records the session id found in a message from connection gen.
func (s *Sequencer) captureLocked(gen uint64, id string) {
	if gen != s.sessionGen {
		s.prevSession, s.sessionGen = s.session, gen
	}
	if id != s.session {
		s.session = strings.Clone(id)
	}
}

// resumeSessionLocked is the session a resume on connection gen asks for:
// the latest one captured on an earlier connection. A server that greets
// every new connection with a fresh session before the resume is answered
// (as a welcome on connect does) must not have that fresh id resumed.
func (s *Sequencer) resumeSessionLocked(gen uint64) string {
	if s.sessionGen == gen {
		return s.prevSession
	}
	return s.session
}

// resumeDataLocked returns what the resume messages for connection gen are
// rendered with, and records each stream as asked for on gen. There is
// nothing to resume, and so no message, when:
//   - Config.CaptureSession is set and no session was captured yet (the
//     server would not know what to resume);
//   - Config.PerStream is set and no sequenced message arrived yet (one
//     message per known stream: none is known);
//   - neither gives anything: no session configured and no sequenced
//     message received, as on the first connection.
//
// With PerStream unset and a session captured before any sequenced message,
// the message is rendered once with .LastSeq 0: the app has seen nothing,
// so everything the session holds is new to it.
func (s *Sequencer) resumeDataLocked(gen uint64) []template.Resume {
	session := s.resumeSessionLocked(gen)
	if s.cfg.CaptureSession && session == "" {
		return nil
	}
	var out []template.Resume
	if s.cfg.PerStream {
		if s.tracker != nil { // nil: no message yet, no stream known
			s.tracker.ForEachStream(func(name string, last int64) {
				out = append(out, template.Resume{Session: session, LastSeq: last, Stream: name})
			})
		}
	} else if last, ok := s.lastLocked(""); ok || session != "" {
		out = append(out, template.Resume{Session: session, LastSeq: last})
	}
	if len(out) > 0 && s.resumed == nil {
		s.resumed = map[string]uint64{}
	}
	for _, d := range out {
		s.resumed[d.Stream] = gen
	}
	return out
}

// resumeInFlightLocked reports whether a resume asked for stream on a connection
// that has not answered it yet: a gap of that stream is then left to the
// resumed replay for a while before it is fetched over HTTP.
func (s *Sequencer) resumeInFlightLocked(stream string) bool {
	_, ok := s.resumed[stream]
	return ok
}

// Position is where a Sequencer's streams stood at one moment: the last
// number delivered in each known stream and the session id captured last.
// It is a copy, which sequencing going on does not change: what a restore
// rewrites its replayed subscriptions from (protocol.Current), all of them
// from the same moment. The zero Position knows nothing.
type Position struct {
	session string
	last    map[string]int64
	epochs  map[string]string // TETHER_EPOCH_PATH values, by stream
}

// LastSeq is the last number delivered in stream, when one was.
func (p Position) LastSeq(stream string) (int64, bool) {
	last, ok := p.last[stream]
	return last, ok
}

// Session is the server's session id captured last, "" when none was.
func (p Position) Session() string { return p.session }

// Epoch is the numbering stream's numbers belong to (TETHER_EPOCH_PATH),
// "" when none was seen.
func (p Position) Epoch(stream string) string { return p.epochs[stream] }

// Position returns where the streams stand now.
func (s *Sequencer) Position() Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := Position{session: s.session}
	if s.tracker == nil {
		return p
	}
	p.last = make(map[string]int64, s.tracker.Streams())
	s.tracker.ForEachStream(func(name string, last int64) { p.last[name] = last })
	for name, st := range s.streams {
		if st.epoch != "" {
			if p.epochs == nil {
				p.epochs = make(map[string]string, len(s.streams))
			}
			p.epochs[name] = st.epoch
		}
	}
	return p
}
