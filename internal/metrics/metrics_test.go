package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
)

var _ app.Metrics = (*Metrics)(nil)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d\n%s", rec.Code, b)
	}
	return string(b)
}

// TestExposition pins the Prometheus names the shipped alert rules read
// (deploy/prometheus/rollcall-alerts.yaml) and the counters' names.
func TestExposition(t *testing.T) {
	ages := map[string]float64{"alpha": 0, "beta": 125.5}
	m, err := New(Options{MismatchAges: func(yield func(string, float64)) {
		for h, v := range ages {
			yield(h, v)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	m.Heartbeat()
	m.Heartbeat()
	m.HeartbeatRowsPersisted(7)
	m.DoorbellRung()
	m.DigestSent()
	m.SweepRung(3)
	m.PoolPushed()
	m.CommitBatch(1)
	m.CommitBatch(5)
	m.PresenceTransition("in")
	m.PresenceTransition("out")
	m.PresenceTransition("out")
	out := scrape(t, m)
	for _, want := range []string{
		`rollcall_agent_billing_mode_mismatch_age_seconds{agent_handle="alpha"} 0`,
		`rollcall_agent_billing_mode_mismatch_age_seconds{agent_handle="beta"} 125.5`,
		`# TYPE rollcall_agent_billing_mode_mismatch_age_seconds gauge`,
		PromHeartbeats + " 2",
		PromPersistedRows + " 7",
		PromFlushes + " 1",
		PromDoorbells + " 1",
		PromDigests + " 1",
		PromSweepRings + " 3",
		PromPoolPushes + " 1",
		PromCommitBatch + `_bucket{le="4"} 1`,
		PromCommitBatch + `_bucket{le="8"} 2`,
		PromCommitBatch + "_sum 6",
		PromCommitBatch + "_count 2",
		PromTransitions + `{presence="in"} 1`,
		PromTransitions + `{presence="out"} 2`,
		"go_goroutines",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if strings.Contains(out, "otel_scope") || strings.Contains(out, "target_info") {
		t.Errorf("exposition carries scope or target info labels:\n%s", out)
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", out)
	}

	// An agent that stops being tracked (or becomes inactive) loses its series.
	delete(ages, "alpha")
	if out := scrape(t, m); strings.Contains(out, `agent_handle="alpha"`) {
		t.Errorf("series of an untracked agent still exported")
	}
}

func TestHookDeliveriesCounted(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.HookDelivery("github", "refused")
	m.HookDelivery("github", "refused")
	m.HookDelivery("standard", "created")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		PromHookDeliveries + `{kind="github",outcome="refused"} 2`,
		PromHookDeliveries + `{kind="standard",outcome="created"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
