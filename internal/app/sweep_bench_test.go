package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// allSessionsHub is a SessionHub with one streaming session for each of
// its agents that takes every notification.
type allSessionsHub struct{ agents []string }

func (allSessionsHub) AgentSessions(agentID string) []app.SessionInfo {
	return []app.SessionInfo{{ID: "s-" + agentID, AgentID: agentID, Streaming: true}}
}
func (allSessionsHub) Notify(string, domain.ChannelMessage) error { return nil }
func (allSessionsHub) CloseAgentSessions(string, []string)        {}
func (h allSessionsHub) AgentsWithSessions() []string             { return h.agents }

// BenchmarkSweepOnce measures one doorbell sweep pass through the use case
// (receivers' cached presence, the store's SweepRing on SQLite, one ring
// per selected todo) with 500 receivers holding 20 pending todos each:
// every op moves the clock 7 h, past every backoff, so each pass rings the
// pass limit (1 000 todos, 3 per agent). 40 ops stay within the ring budget
// of the 10 000 todos.
//
//	go test -run '^$' -bench BenchmarkSweepOnce -benchtime 40x -benchmem ./internal/app/
func BenchmarkSweepOnce(b *testing.B) {
	const agents, perAgent = 500, 20
	ctx := context.Background()
	st := openStore(b)
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	owner := domain.Person{ID: "00000000-0000-7000-8000-000000000001", Name: "admin", Active: true, CreatedAt: t0}
	owner.SetRole(domain.RoleAdmin)
	if _, err := st.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: owner, TokenHash: "h", TokenID: "00000000-0000-7000-8000-000000000002"}); err != nil {
		b.Fatal(err)
	}
	hub := allSessionsHub{}
	for i := range agents {
		a := domain.Agent{ID: fmt.Sprintf("00000000-0000-7000-8001-%012d", i), Handle: fmt.Sprintf("a%d", i), OwnerID: owner.ID, Name: "a",
			Active: true, Scope: domain.Scope{Queues: []string{"q"}, Verbs: []string{"claim_next"}}, BillingModes: []string{}, CreatedAt: t0, UpdatedAt: t0}
		if err := st.CreateAgent(ctx, store.CreateAgentParams{Agent: a, CredentialID: fmt.Sprintf("00000000-0000-7000-8002-%012d", i), CredentialHash: fmt.Sprint("c", i),
			Audit: domain.AuditRecord{Actor: "operator:" + owner.ID, Action: "agent.vend", AgentID: a.ID}}); err != nil {
			b.Fatal(err)
		}
		hub.agents = append(hub.agents, a.ID)
		for j := range perAgent {
			td := domain.Todo{ID: fmt.Sprintf("00000000-0000-7000-8003-%06d%06d", i, j), AgentID: a.ID, Queue: "q", Title: "t", PushEligible: true,
				CreatedBy: "operator:" + owner.ID, State: domain.TodoPending, MaxAttempts: 3, CreatedAt: t0, UpdatedAt: t0}
			if _, _, err := st.CreateTodo(ctx, store.CreateTodoParams{Todo: td}); err != nil {
				b.Fatal(err)
			}
		}
	}
	s := app.New(app.Options{Store: st, Clock: clock})
	defer s.Close()
	s.SetSessionHub(hub)
	rung := 0
	for b.Loop() {
		clock.Advance(7 * time.Hour)
		n, err := s.SweepOnce(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rung += n
	}
	b.ReportMetric(float64(rung)/float64(b.N), "rings/op")
}
