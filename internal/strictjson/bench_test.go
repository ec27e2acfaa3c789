package strictjson_test

import (
	"testing"

	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/strictjson"
)

// heartbeatShape is agent_heartbeat.v1 as plain Go types, without the
// checks of its forms: what Decode would fill if heartbeats went through
// the library.
type heartbeatShape struct {
	State                 string   `json:"state"`
	BillingMode           *string  `json:"billing_mode"`
	BillingModesSupported []string `json:"billing_modes_supported"`
	ToolClass             *string  `json:"tool_class"`
	RuntimeVersion        *string  `json:"runtime_version"`
	BillingEvidence       *struct {
		KeyType string `json:"key_type"`
		Method  string `json:"method"`
	} `json:"billing_evidence"`
	Details *struct {
		Capabilities *struct {
			Followups  *string `json:"followups"`
			Components *bool   `json:"components"`
			VoiceInput *bool   `json:"voice_input"`
			Title      *bool   `json:"title"`
			FilesOut   *bool   `json:"files_out"`
		} `json:"capabilities"`
		ActiveRuns      []string `json:"active_runs"`
		DegradedReasons []string `json:"degraded_reasons"`
		Adapter         *struct {
			Name    string  `json:"name"`
			Version *string `json:"version"`
		} `json:"adapter"`
		Runtime *struct {
			Name string `json:"name"`
		} `json:"runtime"`
		ProtocolVersion *int `json:"protocol_version"`
	} `json:"details"`
	ProjectReadiness []struct {
		Queue  string `json:"queue"`
		Ready  bool   `json:"ready"`
		Reason string `json:"reason"`
	} `json:"project_readiness"`
}

// fullHeartbeat is a heartbeat with every member, in its canonical form.
func fullHeartbeat() []byte {
	str := func(s string) *string { return &s }
	yes, no, one := true, false, 1
	return liveness.Heartbeat{
		State: liveness.StateDegraded, BillingMode: str("subscription"), BillingModesSupported: []string{"subscription", "api"},
		ToolClass: str("claude_code"), RuntimeVersion: str("2.1.14"),
		BillingEvidence: &liveness.BillingEvidence{KeyType: "oauth", Method: "credentials_file"},
		Details: liveness.Details{
			Capabilities:    &liveness.Capabilities{Followups: str(liveness.FollowupsSteer), Components: &yes, VoiceInput: &no, Title: &yes, FilesOut: &yes},
			ActiveRuns:      []string{"4f1c2a9e-8b7d-4c3e-9a6f-1d2e3f4a5b6c", "0a1b2c3d-4e5f-4a7b-8c9d-0e1f2a3b4c5d"},
			DegradedReasons: []string{"mcp_server_unreachable", "rate_limited:anthropic"},
			Adapter:         &liveness.Adapter{Name: "rollcall-claude", Version: str("0.4.2")},
			Runtime:         &liveness.Runtime{Name: "claude-code"}, ProtocolVersion: &one,
		},
		ProjectReadiness:        []liveness.ReadinessEntry{{Queue: "reviews", Ready: true}, {Queue: "deploys", Reason: "no_credentials"}},
		ProjectReadinessPresent: true,
	}.Canonical()
}

// BenchmarkHeartbeatDecoders: the heartbeat's own decoder (every check)
// against the library filling the same shape (no form checks at all). It
// is the measurement behind keeping liveness's walk (docs/benchmarks.md,
// One strict-JSON layer).
//
//	go test -run '^$' -bench HeartbeatDecoders -benchmem ./internal/strictjson/
func BenchmarkHeartbeatDecoders(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{{"full", fullHeartbeat()}, {"minimal", []byte(`{"state":"online"}`)}} {
		body := bc.body
		b.Run("liveness/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := liveness.DecodeHeartbeat(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("library/"+bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var h heartbeatShape
				if err := strictjson.Decode(body, &h, strictjson.REST); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
