package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

var auditTests = []contractTest{
	{"Audit/Chain", testAuditChain},
	{"Audit/ListPaging", testAuditListPaging},
	{"Audit/Verify", testAuditVerify},
	{"Audit/Tampered", testAuditTampered},
	{"Audit/ConcurrentAppend", testAuditConcurrentAppend},
}

func testAuditChain(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	recs := []domain.AuditRecord{
		{Actor: "operator:" + ownerID, Action: "agent.vend", AgentID: "a-1", Data: map[string]string{"handle": "alpha"}},
		{Actor: "system", Action: "server.start"},
		{Actor: "agent:a-1", Action: "todo.claim", AgentID: "a-1", Decision: "deny", Data: json.RawMessage(`{"why": "scope"}`)},
	}
	var got []domain.AuditEntry
	for i, r := range recs {
		e, err := s.AppendAudit(ctx, at(time.Duration(i)*time.Second+1234567*time.Nanosecond), r)
		must(t, "AppendAudit", err)
		got = append(got, e)
	}
	prev := ""
	for i, e := range got {
		if e.Seq != int64(i+1) {
			t.Errorf("entry %d: seq = %d, want %d", i, e.Seq, i+1)
		}
		if e.PrevHash != prev {
			t.Errorf("seq %d: prev_hash = %q, want the previous hash %q", e.Seq, e.PrevHash, prev)
		}
		if e.Hash != domain.AuditHash(e) || e.Hash == "" {
			t.Errorf("seq %d: hash = %q, want domain.AuditHash = %q", e.Seq, e.Hash, domain.AuditHash(e))
		}
		sameTime(t, fmt.Sprintf("seq %d at", e.Seq), &e.At, at(time.Duration(i)*time.Second+1234*time.Microsecond))
		prev = e.Hash
	}
	if got[0].Decision != "allow" || got[2].Decision != "deny" {
		t.Errorf("decisions = %q, %q; want allow (default), deny", got[0].Decision, got[2].Decision)
	}
	sameJSON(t, "data", got[0].Data, json.RawMessage(`{"handle":"alpha"}`))
	sameJSON(t, "raw data", got[2].Data, json.RawMessage(`{"why":"scope"}`))
	if got[1].Data != nil {
		t.Errorf("entry without data has data %q", got[1].Data)
	}

	listed, err := s.ListAudit(ctx, store.ListAuditParams{})
	must(t, "ListAudit", err)
	diff(t, "listed entries", got, listed)

	_, err = s.AppendAudit(ctx, at(time.Hour), domain.AuditRecord{Actor: "system", Action: "bad", Data: make(chan int)})
	if err == nil {
		t.Fatal("AppendAudit with unmarshalable data succeeded")
	}
	if n := auditCount(t, s); n != 3 {
		t.Errorf("entries after a failed append = %d, want 3", n)
	}
}

func appendN(t *testing.T, s store.Store, n int, agentOf func(i int) string) {
	t.Helper()
	for i := range n {
		_, err := s.AppendAudit(t.Context(), at(time.Duration(i)*time.Second), domain.AuditRecord{
			Actor: "system", Action: "test.event", AgentID: agentOf(i), Data: map[string]int{"i": i},
		})
		must(t, "AppendAudit", err)
	}
}

func testAuditListPaging(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	appendN(t, s, 5, func(i int) string { return []string{"a", "b"}[i%2] })
	list := func(p store.ListAuditParams) string {
		t.Helper()
		es, err := s.ListAudit(ctx, p)
		must(t, "ListAudit", err)
		return seqs(es)
	}
	for _, tc := range []struct {
		p    store.ListAuditParams
		want string
	}{
		{store.ListAuditParams{}, "[1 2 3 4 5]"},
		{store.ListAuditParams{AfterSeq: 2, Limit: 2}, "[3 4]"},
		{store.ListAuditParams{AfterSeq: 4, Limit: 2}, "[5]"},
		{store.ListAuditParams{AfterSeq: 5}, "[]"},
		{store.ListAuditParams{AgentID: "a"}, "[1 3 5]"},
		{store.ListAuditParams{AgentID: "a", AfterSeq: 1, Limit: 1}, "[3]"},
		{store.ListAuditParams{AgentID: "c"}, "[]"},
	} {
		if got := list(tc.p); got != tc.want {
			t.Errorf("ListAudit(%+v) = %s, want %s", tc.p, got, tc.want)
		}
	}
}

func testAuditVerify(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	res, err := s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit(empty)", err)
	diff(t, "empty log", domain.AuditVerifyResult{OK: true, Checked: 0, Warnings: []string{}}, res)

	appendN(t, s, 3, func(int) string { return "" })
	vend(t, s, newAgent("alpha", ownerID, "build"))
	res, err = s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	diff(t, "intact log", domain.AuditVerifyResult{OK: true, Checked: 4, Warnings: []string{}}, res)
}

func testAuditTampered(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	appendN(t, s, 5, func(int) string { return "" })
	in.Tamper(t, 3)
	res, err := s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	if res.OK || res.Checked != 5 {
		t.Fatalf("VerifyAudit after tampering = ok %v checked %d, want ok false checked 5", res.OK, res.Checked)
	}
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "seq 3:") {
		t.Fatalf("warnings = %q, want one naming seq 3", res.Warnings)
	}
}

func testAuditConcurrentAppend(t *testing.T, in Instance) {
	s := in.Store
	const workers, each = 4, 10
	errs := parallel(workers, func(w int) error {
		for i := range each {
			if i == each/2 {
				// Appends inside other units of work share the chain.
				p, _ := vendParams(newAgent(fmt.Sprintf("agent-%d", w), ownerID, "build"))
				if err := s.CreateAgent(ctxOf(t), p); err != nil {
					return err
				}
				continue
			}
			if _, err := s.AppendAudit(ctxOf(t), at(time.Duration(i)*time.Second), domain.AuditRecord{
				Actor: fmt.Sprintf("agent:%d", w), Action: "test.event",
			}); err != nil {
				return err
			}
		}
		return nil
	})
	for _, err := range errs {
		must(t, "concurrent append", err)
	}
	res, err := s.VerifyAudit(t.Context(), store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	diff(t, "chain after concurrent appends", domain.AuditVerifyResult{OK: true, Checked: workers * each, Warnings: []string{}}, res)
}
