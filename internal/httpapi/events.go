package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

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
	PumpEvents(w, r, a.svc.Clock(), sub, SSEKeepAlive, func(ctx context.Context) bool {
		err := a.svc.CheckPersonToken(ctx, by.TokenID)
		if err != nil && domain.CodeOf(err) != domain.CodeUnauthenticated {
			// The store did not answer (an outage): keep the stream
			// until a check can tell (a revocation still ends it
			// within one period of the store's return).
			a.log.Warn("event stream: re-checking its token failed; stream kept until the next check", "err", err)
			return true
		}
		return err == nil
	}, func(ev events.Event) error { return writeEvent(w, ev) })
	return nil
}

// PumpEvents is the loop of an event stream whose headers and backlog are
// written (GET /v1/events and the console's stream): it writes each event
// of sub with write, a keep-alive comment every keepAlive, and flushes
// after each. Every app.RecheckInterval on clock it asks valid whether the
// principal behind the stream may still read it, so a revoked or expired
// token or a deactivated person ends the stream on every instance even when
// the bus signal is lost (design: Revocation within 5 s); valid answers true
// while the store cannot tell. It returns when the request ends, sub closes
// (the client fell behind, or shutdown), valid answers false, or a write or
// flush fails.
func PumpEvents(w http.ResponseWriter, r *http.Request, clock clockwork.Clock, sub *events.Subscription, keepAlive time.Duration, valid func(context.Context) bool, write func(events.Event) error) {
	rc := http.NewResponseController(w)
	keep := time.NewTicker(keepAlive)
	defer keep.Stop()
	recheck := clock.NewTicker(app.RecheckInterval)
	defer recheck.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-recheck.Chan():
			if !valid(r.Context()) {
				return
			}
			continue
		case ev, ok := <-sub.C():
			if !ok {
				return // lagged or shutting down: the client reconnects
			}
			if write(ev) != nil {
				return
			}
		case <-keep.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
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
