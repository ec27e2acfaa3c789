package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/testkit/fuzzseed"
)

// FuzzFastFrame: whenever the fast path takes a frame and the heartbeat
// decoder accepts its agent, the strict path accepts the frame too and finds
// the same op and agent: the fast path never lets through what the strict
// path would refuse.
func FuzzFastFrame(f *testing.F) {
	fuzzseed.Bytes(f,
		`{"op":"heartbeat","d":{"agent":{"state":"online"}}}`,
		` { "d" : { "agent" : {"state":"online","details":{"adapter":{"name":"a"}}} } , "op" : "heartbeat" } `,
		`{"op":"heartbeat","d":{}}`, `{"op":"heartbeat"}`, `{"op":"heartbeat","d":null}`,
		`{"op":"heartbeat","d":{"agent":{"state":"online"}},}`, `{"op":"heart\u0062eat","d":{}}`,
		`{"op":"heartbeat","op":"identify"}`, `{"op":"heartbeat","d":{"agent":"x"}}`, `[1]`, `{"op":1}`,
		`{"op":"heartbeat","d":{"agent":{"state":"online"},"agent":{}}}`, `{"op":"heartbeat","d":{"agent":{"state":"on]line"}}}`,
	)
	f.Fuzz(func(t *testing.T, b []byte) {
		op, d, ok := fastFrame(b)
		if !ok {
			return
		}
		fr, strictErr := decodeFrame(b)
		if op != "heartbeat" {
			return
		}
		if len(d) == 0 || string(d) == "null" {
			if strictErr != nil || fr.Op != "heartbeat" {
				t.Fatalf("fast path took %q, strict path: %v %q", b, strictErr, fr.Op)
			}
			return
		}
		agent, ok := fastHeartbeatData(d)
		if !ok {
			return
		}
		if _, err := liveness.DecodeHeartbeat(agent); err != nil {
			return // refused by the decoder: an error frame either way
		}
		in, inErr := decodeHeartbeatData(fr.D)
		if strictErr != nil || fr.Op != "heartbeat" || inErr != nil {
			t.Fatalf("fast path took %q, strict path refused it: %v", b, strictErr)
		}
		if !json.Valid(b) || !bytes.Equal(compact(t, in.Agent), compact(t, agent)) {
			t.Fatalf("fast and strict paths disagree on %q: %q vs %q", b, agent, in.Agent)
		}
	})
}

func compact(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.Bytes()
}

// BenchmarkFrame compares the two ways a heartbeat frame is parsed: the
// fast scanner of the hot path and the strict path (strictjson.Object,
// twice), which reads and checks every byte of the agent member too.
//
//	go test -run '^$' -bench BenchmarkFrame -benchmem ./internal/gateway/
func BenchmarkFrame(b *testing.B) {
	frame := []byte(`{"op":"heartbeat","d":{"agent":{"state":"online","billing_mode":"subscription","tool_class":"claude-code","runtime_version":"2.1.3","billing_evidence":{"key_type":"oauth","method":"credentials_file"},"details":{"adapter":{"name":"rollcall-load","version":"1"},"runtime":{"name":"claude-code"}}}}}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, d, ok := fastFrame(frame)
			if _, ok2 := fastHeartbeatData(d); !ok || !ok2 {
				b.Fatal("refused")
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := decodeFrame(frame)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := decodeHeartbeatData(f.D); err != nil {
				b.Fatal(err)
			}
		}
	})
}
