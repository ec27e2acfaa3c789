package ssestream

import "time"

// Log is the recent message events of one series with their ids, for the
// replay a GET with Last-Event-ID asks for (design: Stream resumption),
// bounded by a count and an age. Its zero value is ready; its owner's lock
// guards it.
//
// Why not mcp-go's WithEventStore (v1.2.1): it answers an unknown
// Last-Event-ID with 400 (a forged or foreign id must answer normally), its
// in-memory store is unbounded until the session ends, and it moves the GET
// path to a session-scoped pump that is started before the first
// connection attaches, so an event queued before a session's first GET can
// be recorded with no connection and never written.
type Log struct {
	IDs
	events []Event
}

// Event is one message event of a Log.
type Event struct {
	Seq   uint64
	At    time.Time
	Frame []byte // "event: message\ndata: …\n\n", without its id line
	Key   string // what the owner names the event by ("" = nothing)
}

// Append records frame under the next id at now and returns the frame
// with its id line, to be written in the same write.
func (l *Log) Append(frame []byte, key string, now time.Time) []byte {
	seq := l.Next()
	l.events = append(l.events, Event{Seq: seq, At: now, Frame: append([]byte(nil), frame...), Key: key})
	return l.Stamp(seq, frame)
}

// Trim drops the events beyond the bounds: more than max, or older than
// window at now.
func (l *Log) Trim(now time.Time, max int, window time.Duration) {
	drop := 0
	for drop < len(l.events) && (len(l.events)-drop > max || now.Sub(l.events[drop].At) > window) {
		drop++
	}
	if drop > 0 {
		clear(l.events[:drop])
		l.events = l.events[drop:]
	}
}

// Events are the events kept, oldest first; the caller must not change
// them.
func (l *Log) Events() []Event { return l.events }

// After returns the events kept after sequence number seq, each with its
// id line, and how many events after seq are no longer kept.
func (l *Log) After(seq uint64) (frames [][]byte, missed uint64) {
	next := seq + 1
	for _, ev := range l.events {
		if ev.Seq <= seq {
			continue
		}
		if ev.Seq > next && len(frames) == 0 {
			missed = ev.Seq - next
		}
		frames = append(frames, l.Stamp(ev.Seq, ev.Frame))
	}
	if len(frames) == 0 && seq < l.Last() {
		missed = l.Last() - seq
	}
	return frames, missed
}
