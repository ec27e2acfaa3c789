package app

import (
	"context"

	"github.com/rollcall/rollcall/internal/domain"
)

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
