package ssestream

import (
	"strconv"
	"time"
)

// PingIDPrefix starts the id of every ping request written on a stream: an
// answer with such an id is an answer to one.
const PingIDPrefix = "rollcall-ping-"

// Ping is the liveness by ping of one stream's client (design: Session
// liveness by ping): the ping in flight and what the answers proved. The
// owner writes the pings Scan asks for and hands it the answers; its lock
// guards the Ping.
type Ping struct {
	n        uint64    // pings sent; the next id is PingIDPrefix + n+1
	id       string    // the ping in flight, "" = none
	sent     time.Time // when the last ping was sent
	seq      uint64    // event sequence number when the ping in flight was written
	readSeq  uint64    // event sequence number at the last answered ping: every event up to it was read
	answered bool      // the client answered a ping at least once
	late     bool      // stalled: the ping in flight went unanswered for the timeout
}

// Scan decides at now. A ping in flight timeout old is lost, not
// unanswered, when the client acted (actedAt) since it was sent. One that
// a client which answered before leaves unanswered for timeout makes the
// stream late: late is true once, with readSeq, the event sequence number
// up to which the client read. Else, when the last ping is interval old, a
// new one is due: send is its id.
func (p *Ping) Scan(now time.Time, interval, timeout time.Duration, actedAt time.Time) (send string, late bool, readSeq uint64) {
	if p.id != "" && now.Sub(p.sent) >= timeout && actedAt.After(p.sent) {
		p.id = ""
	}
	switch {
	case p.id != "":
		if p.answered && !p.late && now.Sub(p.sent) >= timeout {
			p.late = true
			return "", true, p.readSeq
		}
	case now.Sub(p.sent) >= interval:
		p.n++
		p.id, p.sent = PingIDPrefix+strconv.FormatUint(p.n, 10), now
		return p.id, false, 0
	}
	return "", false, 0
}

// Written records that ping id was written when seq was the stream's last
// event sequence number.
func (p *Ping) Written(id string, seq uint64) {
	if p.id == id {
		p.seq = seq
	}
}

// Unsent forgets ping id, which was not written: the next Scan sends a new
// one.
func (p *Ping) Unsent(id string) {
	if p.id == id {
		p.id, p.sent = "", time.Time{}
	}
}

// Answer records the client's answer to ping id: when it is the ping in
// flight (ok), the stream is not late, every event written before the
// ping counts as read, first tells whether it was the client's first
// answer and recovered whether it ended a stall. Any other id (a late
// answer to an earlier ping, a made-up one) proves nothing.
func (p *Ping) Answer(id string) (ok, first, recovered bool) {
	if id != p.id {
		return false, false, false
	}
	p.id = ""
	p.readSeq = max(p.readSeq, p.seq)
	first, recovered = !p.answered, p.late
	p.answered, p.late = true, false
	return true, first, recovered
}

// Late reports whether the stream is stalled: its ping in flight went
// unanswered for the timeout.
func (p *Ping) Late() bool { return p.late }

// Acted ends a stall: the client made a request. The ping in flight
// stays: its answer tells what was read.
func (p *Ping) Acted() { p.late = false }

// Reset ends a stall when a new stream opens: the ping in flight went out
// on the old one and is dropped; the next one is due an interval after
// the last.
func (p *Ping) Reset() { p.id, p.late = "", false }
