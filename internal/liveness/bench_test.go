package liveness

import (
	"bytes"
	"encoding/json"
	"testing"
)

// fullBody is a typical heartbeat of a Claude Code adapter with every member.
const fullBody = `{
  "state": "degraded",
  "billing_mode": "subscription",
  "billing_modes_supported": ["subscription", "api"],
  "tool_class": "claude_code",
  "runtime_version": "2.1.14",
  "billing_evidence": {"key_type": "oauth", "method": "credentials_file"},
  "details": {
    "capabilities": {"followups": "steer", "components": true, "voice_input": false, "title": true, "files_out": true},
    "active_runs": ["4f1c2a9e-8b7d-4c3e-9a6f-1d2e3f4a5b6c", "0a1b2c3d-4e5f-4a7b-8c9d-0e1f2a3b4c5d"],
    "degraded_reasons": ["mcp_server_unreachable", "rate_limited:anthropic"],
    "adapter": {"name": "rollcall-claude", "version": "0.4.2"},
    "runtime": {"name": "claude-code"},
    "protocol_version": 1
  },
  "project_readiness": [
    {"queue": "reviews", "ready": true},
    {"queue": "deploys", "ready": false, "reason": "no_credentials"}
  ]
}`

const minimalBody = `{"state":"online"}`

func BenchmarkDecodeHeartbeat(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"full", fullBody},
		{"minimal", minimalBody},
	} {
		body := []byte(bc.body)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := DecodeHeartbeat(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeHeartbeatReject measures the error path: a typical body
// with one unknown member at the end (the whole body is then checked for
// well-formedness by encoding/json).
func BenchmarkDecodeHeartbeatReject(b *testing.B) {
	body := []byte(fullBody[:len(fullBody)-1] + `,"extra":1}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeHeartbeat(body); err == nil {
			b.Fatal("accepted")
		}
	}
}

func BenchmarkCanonical(b *testing.B) {
	h, err := DecodeHeartbeat([]byte(fullBody))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = h.Canonical()
	}
}

// BenchmarkTokenStream measures the alternative the decoder does not use:
// walking the same body with json.Decoder.Token (no checks at all).
func BenchmarkTokenStream(b *testing.B) {
	body := []byte(fullBody)
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(body))
		for {
			if _, err := dec.Token(); err != nil {
				break
			}
		}
	}
}
