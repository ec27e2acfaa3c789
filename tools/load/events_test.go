package main

import (
	"slices"
	"strings"
	"testing"
)

// TestReadEvents: each data line reaches on with the event kind last named,
// comments and blank lines are passed over, and the last id is returned.
func TestReadEvents(t *testing.T) {
	stream := ": keep-alive\n\n" +
		"id: 7\nevent: agent.presence_changed\ndata: {\"data\":{\"state\":\"offline\"}}\n\n" +
		"id: 8\nevent: stream.missed\ndata: {}\n\n"
	var got []string
	last := readEvents(strings.NewReader(stream), func(kind string, data []byte) {
		got = append(got, kind+" "+string(data))
	})
	want := []string{`agent.presence_changed {"data":{"state":"offline"}}`, "stream.missed {}"}
	if !slices.Equal(got, want) || last != "8" {
		t.Fatalf("got %q, last id %q; want %q, last id 8", got, last, want)
	}
}
