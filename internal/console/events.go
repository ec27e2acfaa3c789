package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/httpapi"
)

// keepAlive is how often an idle event stream sends a comment line, so
// proxies do not close it.
const keepAlive = 25 * time.Second

// consoleEvent is the data of the console's SSE events: which agent
// changed and why. The page then fetches that agent's card fragment.
type consoleEvent struct {
	AgentID string `json:"agent_id"`
	Kind    string `json:"kind"`
}

// eventStream is GET /console/events: a text/event-stream of the signed-in
// person's agent events (the event hub filters by owner), resumed after the
// Last-Event-ID header or else the since query parameter (the page's
// cursor, see fleetView.Since). Event "agent" carries
// consoleEvent; event "missed" tells the page to refresh every card (the
// Last-Event-ID it resumed from is no longer buffered). At shutdown the
// hub closes the subscription and the stream ends.
func (h *Handler) eventStream(w http.ResponseWriter, r *http.Request, v *visit) {
	// The browser's Last-Event-ID (a reconnect) comes first; a page's first
	// connection resumes from the cursor taken before it read what it shows
	// (since), so an event between the page's reads and this subscription
	// is not lost (design: Console live updates).
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("since")
	}
	sub, err := h.svc.SubscribeEvents(v.person.ID, v.person.TokenID, last)
	if err != nil {
		http.Error(w, "live updates are unavailable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer sub.Close()
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 3000\n\n")
	if sub.Missed {
		fmt.Fprint(w, "event: missed\ndata: {}\n\n")
	}
	for _, ev := range sub.Backlog {
		writeEvent(w, ev)
	}
	if rc.Flush() != nil {
		return
	}
	// Re-check the session row: sign-out, a revoked token or a deactivated
	// person ends the stream within app.RecheckInterval on every instance;
	// a store error (an outage) keeps the stream until a check can tell.
	httpapi.PumpEvents(w, r, h.svc.Clock(), sub, keepAlive, func(ctx context.Context) bool {
		_, err := h.svc.ConsoleSession(ctx, v.sess.ID)
		return err == nil || domain.CodeOf(err) != domain.CodeUnauthenticated
	}, func(ev events.Event) error { return writeEvent(w, ev) })
}

func writeEvent(w http.ResponseWriter, ev events.Event) error {
	if ev.AgentID == "" {
		return nil
	}
	data, _ := json.Marshal(consoleEvent{AgentID: ev.AgentID, Kind: ev.Kind})
	id := strings.NewReplacer("\n", "", "\r", "").Replace(ev.ID)
	_, err := fmt.Fprintf(w, "id: %s\nevent: agent\ndata: %s\n\n", id, data)
	return err
}
