package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/events"
)

// GET /v1/events: the operator event stream (Server-Sent Events;
// design: Operator event stream, Console sessions). A person receives the
// events of their own agents only: agent.presence_changed (the liveness
// pair; design: Presence-changed events), agent.presence_transition (in/out;
// design: Effective presence) and agent.todos_changed (the agent's todos
// changed, coalesced per agent; design: Operator event stream). Every
// event has an id; a client that reconnects with Last-Event-ID resumes
// after that event while it is among the last events.BufferSize events,
// and otherwise first receives a stream.missed event (re-read the state you
// show). A comment line is sent every SSEKeepAlive so proxies keep the
// stream open. The stream ends at server shutdown and when the client
// falls too far behind (reconnect with Last-Event-ID), and within
// app.RecheckInterval of its token being revoked or expiring or its person
// being deactivated (reconnecting then answers 401).

// SSEKeepAlive is the period of the keep-alive comment.
const SSEKeepAlive = 15 * time.Second

func (a *api) streamEvents(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	last := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	sub, err := a.svc.SubscribeEvents(by.ID, by.TokenID, last)
	if err != nil {
		return &statusError{http.StatusServiceUnavailable, &domain.Error{Code: domain.CodeInternal, Detail: err.Error()}}
	}
	defer sub.Close()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if sub.Missed {
		data, _ := json.Marshal(events.StreamMissedData{LastEventID: last, Buffer: events.BufferSize})
		if err := writeSSE(w, "", events.KindStreamMissed, data); err != nil {
			return nil
		}
	}
	for _, ev := range sub.Backlog {
		if err := writeEvent(w, ev); err != nil {
			return nil
		}
	}
	if _, err := w.Write([]byte(": stream open\n\n")); err != nil {
		return nil
	}
	_ = rc.Flush()
	keep := time.NewTicker(SSEKeepAlive)
	defer keep.Stop()
	// The token is re-checked every app.RecheckInterval: revoking it,
	// letting it expire or deactivating the person ends the stream on
	// every instance even when the bus signal is lost (design: Revocation within 5 s).
	recheck := a.svc.Clock().NewTicker(app.RecheckInterval)
	defer recheck.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-recheck.Chan():
			if err := a.svc.CheckPersonToken(r.Context(), by.TokenID); err != nil {
				if domain.CodeOf(err) == domain.CodeUnauthenticated {
					return nil
				}
				// The store did not answer (an outage): keep the stream
				// until a check can tell (a revocation still ends it
				// within one period of the store's return).
				a.log.Warn("event stream: re-checking its token failed; stream kept until the next check", "err", err)
			}
			continue
		case ev, ok := <-sub.C():
			if !ok {
				return nil // lagged or shutting down: the client reconnects
			}
			if err := writeEvent(w, ev); err != nil {
				return nil
			}
		case <-keep.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// writeEvent writes one event; its data is the Event as JSON: {id, kind,
// at, agent_id, data} (the owner is not sent).
func writeEvent(w http.ResponseWriter, ev events.Event) error {
	data, _ := json.Marshal(ev) // strings, a time and raw JSON
	return writeSSE(w, ev.ID, ev.Kind, data)
}

func writeSSE(w http.ResponseWriter, id, kind string, data []byte) error {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + kind + "\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	_, err := w.Write([]byte(b.String()))
	return err
}
