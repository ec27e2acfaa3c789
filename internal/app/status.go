package app

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// AgentRuntimeStatus is the owner's view of an agent's runtime (design:
// Heartbeat presence, Rules; GET /v1/agents/{ref}/status, `rollcall agent
// status`, the console): liveness state, last heartbeat, what the runtime
// reported, the warnings, and the in/out presence.
type AgentRuntimeStatus struct {
	AgentID string `json:"agent_id"`
	Agent   string `json:"agent"` // handle
	// State is unknown, online, degraded or offline at the time of the read.
	State string `json:"state"`
	// LastHeartbeatAt is the server-clock time of the last heartbeat known
	// (null = never).
	LastHeartbeatAt *time.Time `json:"last_heartbeat_at"`
	// BillingMode and ToolClass are what the owner configured ("" = none).
	BillingMode string `json:"billing_mode,omitempty"`
	ToolClass   string `json:"tool_class,omitempty"`
	// ReportedBillingMode and ReportedToolClass are the last reported
	// values (null = not reported); the billing mode is kept while offline.
	ReportedBillingMode   *string  `json:"reported_billing_mode"`
	ReportedToolClass     *string  `json:"reported_tool_class"`
	BillingModesSupported []string `json:"billing_modes_supported,omitempty"`
	// BillingEvidence is how the runtime determined its billing mode (null
	// = not reported).
	BillingEvidence *BillingEvidence `json:"billing_evidence"`
	// Warnings are codes: billing_mode_mismatch, billing_mode_unsupported,
	// billing_evidence_unknown, tool_class_mismatch (never null).
	Warnings []string `json:"warnings"`
	// Runtime is the runtime the adapter drives (null = nothing reported).
	Runtime *RuntimeInfo `json:"runtime"`
	// Adapter is the adapter that sends the heartbeats (null = not reported).
	Adapter *AdapterInfo `json:"adapter"`
	// ProjectReadiness is the last list applied (null = never reported); a
	// queue with ready=false gets no doorbells and no sweep rings.
	ProjectReadiness []Readiness `json:"project_readiness"`
	// Presence is the in/out presence (design: Presence: in / out).
	Presence AgentPresence `json:"presence"`
}

// BillingEvidence is billing_evidence of a heartbeat.
type BillingEvidence struct {
	KeyType string `json:"key_type"`
	Method  string `json:"method"`
}

// RuntimeInfo names the runtime and its version (reported_runtime_version).
type RuntimeInfo struct {
	Name           string  `json:"name,omitempty"`
	RuntimeVersion *string `json:"runtime_version,omitempty"`
}

// AdapterInfo names the adapter and the adapter's own version.
type AdapterInfo struct {
	Name    string  `json:"name"`
	Version *string `json:"version,omitempty"`
}

// Readiness is one entry of project_readiness.
type Readiness struct {
	Queue  string `json:"queue"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// AgentStatus returns the owner's AgentRuntimeStatus of an agent: the
// liveness tracker's view (its entry when this instance owns the agent's
// deadline, else the stored row) and the in/out presence.
// Errors: not_found (unknown agent or another person's).
func (s *Service) AgentStatus(ctx context.Context, by domain.Person, ref string) (AgentRuntimeStatus, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return AgentRuntimeStatus{}, err
	}
	lv := s.liveness.Status(&a)
	st := AgentRuntimeStatus{AgentID: a.ID, Agent: a.Handle, BillingMode: a.BillingMode, ToolClass: a.ToolClass,
		State: lv.State, LastHeartbeatAt: lv.LastHeartbeatAt, ReportedBillingMode: lv.ReportedBillingMode,
		ReportedToolClass: lv.ReportedToolClass, Warnings: lv.Warnings}
	if h := lv.Report; h != nil {
		st.BillingModesSupported = h.BillingModesSupported
		if ev := h.BillingEvidence; ev != nil {
			st.BillingEvidence = &BillingEvidence{KeyType: ev.KeyType, Method: ev.Method}
		}
		if h.Details.Runtime != nil || h.RuntimeVersion != nil {
			st.Runtime = &RuntimeInfo{RuntimeVersion: h.RuntimeVersion}
			if h.Details.Runtime != nil {
				st.Runtime.Name = h.Details.Runtime.Name
			}
		}
		if ad := h.Details.Adapter; ad != nil {
			st.Adapter = &AdapterInfo{Name: ad.Name, Version: ad.Version}
		}
	}
	if lv.ReadinessKnown {
		st.ProjectReadiness = make([]Readiness, len(lv.Readiness))
		for i, r := range lv.Readiness {
			st.ProjectReadiness[i] = Readiness(r)
		}
	}
	if s.presenceStore() != nil {
		if st.Presence, err = s.GetPresence(ctx, by, a.ID); err != nil {
			return AgentRuntimeStatus{}, err
		}
	}
	return st, nil
}
