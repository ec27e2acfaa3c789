package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// Vend registers an agent owned by the person and returns its first
// credential (shown once), its MCP URL and a ready-to-paste `claude mcp add`
// line. Audited as agent.vend. Errors: invalid_argument (with pointer),
// conflict (handle taken).
func (s *Service) Vend(ctx context.Context, by domain.Person, in VendInput) (VendResult, error) {
	if !domain.ValidName(in.Handle) {
		return VendResult{}, domain.Errorf(domain.CodeInvalidArgument, "handle %q must match ^[a-z0-9][a-z0-9._-]*$ (at most %d bytes)", in.Handle, domain.MaxHandleLen).At("/handle")
	}
	if err := domain.ValidateDisplayName(in.Name); err != nil {
		return VendResult{}, err
	}
	scope := domain.Scope{Queues: in.Queues, Verbs: in.Verbs}
	if scope.Verbs == nil {
		scope.Verbs = []string{}
	}
	grants, err := s.resolveHandoff(ctx, by, in.Handoff)
	if err != nil {
		return VendResult{}, err
	}
	scope.Handoff = grants
	if err := scope.Validate(); err != nil {
		return VendResult{}, err
	}
	if err := domain.ValidateBilling(in.BillingMode, in.BillingModes, in.ToolClass); err != nil {
		return VendResult{}, err
	}
	now := s.now()
	name := in.Name
	if name == "" {
		name = in.Handle
	}
	modes := in.BillingModes
	if modes == nil {
		modes = []string{}
	}
	a := domain.Agent{
		ID: newID(), Handle: in.Handle, OwnerID: by.ID, Name: name, Active: true, Scope: scope,
		BillingMode: in.BillingMode, BillingModes: modes, ToolClass: in.ToolClass,
		CreatedAt: now, UpdatedAt: now,
		SelfClockInCap: domain.ClockInCap(presence.DefaultSelfClockInCap), // the column's default
	}
	token := NewToken(AgentTokenPrefix)
	credID := newID()
	data := map[string]any{"handle": a.Handle, "queues": scope.Queues, "verbs": scope.Verbs, "credential_id": credID}
	if len(grants) > 0 {
		data["handoff"] = grants
	}
	err = s.store.CreateAgent(ctx, store.CreateAgentParams{
		Agent: a, CredentialID: credID, CredentialHash: HashToken(token),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.vend", AgentID: a.ID, Data: data},
	})
	if err != nil {
		return VendResult{}, storeErr(err, "", fmt.Sprintf("handle %q is already taken", in.Handle))
	}
	s.log.Info("agent vended", "agent", a.Handle, "agent_id", a.ID, "owner", by.ID)
	s.presenceWritten(ctx, &a, "")
	mcpURL := s.publicURL + "/mcp"
	return VendResult{Agent: a, Credential: token, MCPURL: mcpURL, ClaudeMCPAdd: ClaudeMCPAddLine(a.Handle, mcpURL, token)}, nil
}

// ClaudeMCPAddLine renders the command that registers the agent's endpoint
// with Claude Code, bearer header included.
func ClaudeMCPAddLine(handle, mcpURL, token string) string {
	return fmt.Sprintf("claude mcp add --transport http rollcall-%s %s --header %s", handle, shellQuote(mcpURL), shellQuote("Authorization: Bearer "+token))
}

func shellQuote(s string) string {
	if _, err := url.Parse(s); err == nil && !strings.ContainsAny(s, " '\"$`\\!*?&;|<>(){}[]#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ListAgents lists the person's agents ordered by handle.
func (s *Service) ListAgents(ctx context.Context, by domain.Person) ([]domain.Agent, error) {
	return s.store.ListAgents(ctx, store.ListAgentsParams{OwnerID: by.ID})
}

// UpdateAgent changes name, billing configuration or the active flag.
// Audited as agent.update. Errors: not_found, invalid_argument, conflict
// (revoked).
func (s *Service) UpdateAgent(ctx context.Context, by domain.Person, ref string, in UpdateInput) (domain.Agent, error) {
	if in.Owner != nil {
		return s.handOver(ctx, by, ref, in)
	}
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return a, err
	}
	if a.Revoked() {
		return domain.Agent{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it cannot be changed", a.Handle)
	}
	capText := in.SelfClockInCap // the presence part, written last (SetSelfClockInCap)
	in.SelfClockInCap = nil
	if capText != nil {
		if _, err := presence.ParseSelfClockInCap(*capText); err != nil {
			return domain.Agent{}, err
		}
		if in == (UpdateInput{}) {
			return s.SetSelfClockInCap(ctx, by, a.ID, *capText)
		}
	}
	if in == (UpdateInput{}) {
		return a, nil // nothing to change: no write, no audit entry
	}
	if in.Name != nil {
		if err := domain.ValidateDisplayName(*in.Name); err != nil {
			return domain.Agent{}, err
		}
	}
	mode, modes, class := a.BillingMode, a.BillingModes, a.ToolClass
	if in.BillingMode != nil {
		mode = *in.BillingMode
	}
	if in.BillingModes != nil {
		modes = *in.BillingModes
		if modes == nil {
			modes = []string{}
			in.BillingModes = &modes
		}
	}
	if in.ToolClass != nil {
		class = *in.ToolClass
	}
	if err := domain.ValidateBilling(mode, modes, class); err != nil {
		return domain.Agent{}, err
	}
	updated, err := s.store.UpdateAgent(ctx, store.UpdateAgentParams{
		ID: a.ID, Name: in.Name, BillingMode: in.BillingMode, BillingModes: in.BillingModes, ToolClass: in.ToolClass, Active: in.Active,
		Now:   s.now(),
		Audit: &domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.update", AgentID: a.ID, Data: in},
	})
	if err != nil {
		return domain.Agent{}, storeErr(err, fmt.Sprintf("agent %q not found", ref), fmt.Sprintf("agent %s is revoked; it cannot be changed", a.Handle))
	}
	if in.Active != nil && !*in.Active {
		s.closeSessions(ctx, a.ID, nil)
	}
	s.configWritten(ctx, &updated)
	if capText != nil {
		return s.SetSelfClockInCap(ctx, by, a.ID, *capText)
	}
	return updated, nil
}

// RevokeAgent revokes the agent permanently: credentials revoked, open
// sessions on every instance closed, later changes answer conflict. Audited
// as agent.revoke.
func (s *Service) RevokeAgent(ctx context.Context, by domain.Person, ref string) (domain.Agent, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return a, err
	}
	revoked, err := s.store.RevokeAgent(ctx, store.RevokeAgentParams{ID: a.ID, Now: s.now(),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.revoke", AgentID: a.ID, Data: map[string]any{"handle": a.Handle}}})
	if err != nil {
		return domain.Agent{}, storeErr(err, fmt.Sprintf("agent %q not found", ref), fmt.Sprintf("agent %s is already revoked", a.Handle))
	}
	s.log.Info("agent revoked", "agent", a.Handle, "agent_id", a.ID, "by", by.ID)
	s.closeSessions(ctx, a.ID, nil)
	s.configWritten(ctx, &revoked)
	return revoked, nil
}

// RotateCredential replaces the agent's credentials with a new one; sessions
// opened with the old ones are closed. Audited as agent.rotate_credential.
func (s *Service) RotateCredential(ctx context.Context, by domain.Person, ref string) (RotateResult, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return RotateResult{}, err
	}
	if a.Revoked() {
		return RotateResult{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it cannot get a credential", a.Handle)
	}
	token := NewToken(AgentTokenPrefix)
	credID := newID()
	old, err := s.store.RotateCredential(ctx, store.RotateCredentialParams{AgentID: a.ID, CredentialID: credID, CredentialHash: HashToken(token), Now: s.now(),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.rotate_credential", AgentID: a.ID, Data: map[string]any{"credential_id": credID}}})
	if err != nil {
		return RotateResult{}, storeErr(err, fmt.Sprintf("agent %q not found", ref), fmt.Sprintf("agent %s is revoked; it cannot get a credential", a.Handle))
	}
	s.log.Info("agent credential rotated", "agent", a.Handle, "agent_id", a.ID, "by", by.ID)
	if len(old) > 0 {
		s.closeSessions(ctx, a.ID, old)
	}
	mcpURL := s.publicURL + "/mcp"
	return RotateResult{Agent: a, Credential: token, MCPURL: mcpURL, ClaudeMCPAdd: ClaudeMCPAddLine(a.Handle, mcpURL, token)}, nil
}

// handOver gives an agent to another active person (PATCH /v1/agents/{ref}
// {"owner": <person id>}). Only an admin may, for any agent, and never to
// themself (unless the agent is already theirs: nothing changes); a member
// gets not_found for another's agent and forbidden for its own. The agent
// keeps working: its credentials, sessions and todos are untouched; the new
// owner sees it and its events from now on, and MCP calls see the new owner
// at once (the credential cache is cleared). Its hooks get new secrets that
// nobody is shown (the previous owner knew the old ones): deliveries are
// refused until the new owner rotates each hook's secret and configures
// the sender with it. Audited as agent.hand_over (and hook.rotate_secret
// per hook). Errors: not_found, forbidden (reason admin_required, or
// hand_over_to_self), invalid_argument (/owner: unknown or deactivated
// person; owner with other members), conflict (revoked agent).
func (s *Service) handOver(ctx context.Context, by domain.Person, ref string, in UpdateInput) (domain.Agent, error) {
	if !by.Admin {
		if _, err := s.OwnedAgent(ctx, by, ref); err != nil {
			return domain.Agent{}, err
		}
		return domain.Agent{}, requireAdmin(by, "handing an agent to another person")
	}
	to := *in.Owner
	in.Owner = nil
	if in != (UpdateInput{}) {
		return domain.Agent{}, domain.Errorf(domain.CodeInvalidArgument, "owner is changed alone; send the other members in a second request").At("/owner")
	}
	a, err := s.AgentByRef(ctx, ref)
	if err != nil {
		return domain.Agent{}, err
	}
	if a.Revoked() {
		return domain.Agent{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it cannot be changed", a.Handle)
	}
	target, err := s.store.GetPerson(ctx, to)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && !target.Active) {
		return domain.Agent{}, domain.Errorf(domain.CodeInvalidArgument, "owner %q is not an active person (GET /v1/persons lists them)", to).At("/owner")
	}
	if err != nil {
		return domain.Agent{}, err
	}
	if a.OwnerID == to {
		return a, nil
	}
	if to == by.ID {
		// An admin who took another person's agent would read its payloads:
		// a hand-over goes to another person.
		return domain.Agent{}, &domain.Error{Code: domain.CodeForbidden, Reason: "hand_over_to_self", Pointer: "/owner",
			Detail: "an admin cannot hand another person's agent to themself; hand it to another person"}
	}
	if err := s.RotateHookSecretsOf(ctx, by, a); err != nil {
		return domain.Agent{}, err
	}
	updated, err := s.store.UpdateAgent(ctx, store.UpdateAgentParams{ID: a.ID, OwnerID: &to, By: by.ID, Now: s.now(),
		Audit: &domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.hand_over", AgentID: a.ID,
			Data: map[string]any{"handle": a.Handle, "from": a.OwnerID, "to": to}}})
	if err != nil {
		return domain.Agent{}, storeErr(err, fmt.Sprintf("agent %q not found", ref), fmt.Sprintf("agent %s is revoked; it cannot be changed", a.Handle))
	}
	s.log.Info("agent handed over", "agent", a.Handle, "agent_id", a.ID, "from", a.OwnerID, "to", to, "by", by.ID)
	s.teamSignal(ctx, bus.Team{Kind: bus.TeamOwner, ID: a.ID, OwnerID: to, Handle: a.Handle})
	s.configWritten(ctx, &updated)
	return updated, nil
}
