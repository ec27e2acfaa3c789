package ssestream

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// Message events and their ids (design: Stream resumption).

// MessagePrefix starts every message event: its event line and the start
// of its data line.
var MessagePrefix = []byte("event: message\ndata: ")

// idPrefix starts an event's id line.
const idPrefix = "id: "

// MessageFrame is data (one line of JSON) as an SSE message event:
// "event: message\ndata: <data>\n\n".
func MessageFrame(data []byte) []byte {
	out := make([]byte, 0, len(MessagePrefix)+len(data)+2)
	out = append(out, MessagePrefix...)
	out = append(out, data...)
	return append(out, '\n', '\n')
}

// MessageData returns the data of a message event (MessageFrame); false
// when frame is not one.
func MessageData(frame []byte) ([]byte, bool) {
	if !bytes.HasPrefix(frame, MessagePrefix) {
		return nil, false
	}
	return bytes.TrimSuffix(frame[len(MessagePrefix):], []byte("\n\n")), true
}

// IDs issues the event ids of one series of events (one session's): a
// tag random per series, a dot and a sequence number, so the ids of
// another series never parse here. Its owner's lock guards it.
type IDs struct {
	tag string
	seq uint64 // the last sequence number issued
}

// Next issues the next sequence number (from 1).
func (d *IDs) Next() uint64 {
	if d.tag == "" {
		var b [9]byte
		_, _ = rand.Read(b[:])
		d.tag = base64.RawURLEncoding.EncodeToString(b[:])
	}
	d.seq++
	return d.seq
}

// Last is the last sequence number issued; 0 when none was.
func (d *IDs) Last() uint64 { return d.seq }

// Stamp returns frame with the id line of sequence number seq before it,
// to be written in the same write.
func (d *IDs) Stamp(seq uint64, frame []byte) []byte {
	out := make([]byte, 0, len(idPrefix)+len(d.tag)+24+len(frame))
	out = append(out, idPrefix...)
	out = append(out, d.tag...)
	out = append(out, '.')
	out = strconv.AppendUint(out, seq, 10)
	out = append(out, '\n')
	return append(out, frame...)
}

// Parse returns the sequence number of an id this series issued, or
// false for anything else (forged, foreign, future, malformed).
func (d *IDs) Parse(id string) (uint64, bool) {
	tag, num, ok := strings.Cut(strings.TrimSpace(id), ".")
	if !ok || d.tag == "" || tag != d.tag {
		return 0, false
	}
	seq, err := strconv.ParseUint(num, 10, 64)
	if err != nil || seq > d.seq {
		return 0, false
	}
	return seq, true
}

// MessageJSON is v in JSON as a message event (MessageFrame).
func MessageJSON(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return MessageFrame(data), nil
}
