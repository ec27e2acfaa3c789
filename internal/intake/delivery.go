package intake

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// NewSecret returns "whsec_" + base64 of 32 random bytes: a Standard
// Webhooks signing key, and as a string the HMAC key GitHub uses.
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("rollcall: crypto/rand failed: " + err.Error())
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:])
}

// Verify checks a delivery to hook h (design: Hook signatures): its
// signature (and, for Standard Webhooks, its timestamp against now) with
// the hook's secret, before anything of the body is parsed. It returns the
// body to decode (GitHub's form deliveries carry it in a field). Errors:
// those of VerifyGitHub and VerifyStandard.
func Verify(h domain.Hook, header http.Header, body []byte, now time.Time) ([]byte, error) {
	if h.Kind == domain.HookGitHub {
		return VerifyGitHub(h.Secret, header, body)
	}
	return body, VerifyStandard(h.Secret, header, body, now)
}

// Refusal is why a delivery is refused: Reason goes to the hook's delivery
// log (it never echoes the body), Err to the sender.
type Refusal struct {
	Reason string
	Err    error
}

var errBadSignature = &domain.Error{Code: domain.CodeUnauthenticated, Detail: "the delivery's signature is missing or does not verify with this hook's secret"}

// Refused maps an error of Verify onto the refusal the sender is told:
// unauthenticated for a missing or bad signature, invalid_argument for a
// stale timestamp or (reason unsupported_media_type) a Content-Type other
// than JSON or form. ok is false for another error (the hook's secret is
// broken: an internal error).
func Refused(err error) (r Refusal, ok bool) {
	switch {
	case errors.Is(err, ErrUnsigned):
		return Refusal{"missing signature", errBadSignature}, true
	case errors.Is(err, ErrBadSignature):
		return Refusal{"bad signature", errBadSignature}, true
	case errors.Is(err, ErrStale):
		return Refusal{"stale timestamp", domain.Errorf(domain.CodeInvalidArgument,
			"webhook-timestamp is more than %s away from the server's time", Tolerance)}, true
	case errors.Is(err, ErrContentType):
		return Refusal{"unsupported content type", &domain.Error{Code: domain.CodeInvalidArgument, Reason: "unsupported_media_type",
			Detail: "Content-Type must be application/json (or application/x-www-form-urlencoded for GitHub)"}}, true
	}
	return Refusal{}, false
}

// deliveryKey checks a delivery id header: required, one line, ≤
// domain.MaxKeyLen bytes.
func deliveryKey(name, v string) error {
	if v == "" {
		return domain.Errorf(domain.CodeInvalidArgument, "the %s header is required", name)
	}
	if err := domain.ValidateText("key", v, domain.MaxKeyLen, true); err != nil {
		return domain.Errorf(domain.CodeInvalidArgument, "the %s header must be one line of at most %d bytes", name, domain.MaxKeyLen)
	}
	return nil
}

// TodoKey is the idempotency key of the todo a delivery makes: the
// delivery id in the hook's own namespace, hook:<hook id>:<delivery id>,
// so a delivery never meets an operator's key, a hand_off key or another
// hook's delivery id.
func TodoKey(hookID, deliveryID string) string { return "hook:" + hookID + ":" + deliveryID }

// StandardSource is the todo source of a Standard Webhooks delivery.
const StandardSource = "webhook"

// Verified is a verified delivery read: what to record, and the todo it
// makes (nil for a ping or an ignored event). IDs come from newID; the
// todo is attributed hook:<id>, push-eligible and pending.
type Verified struct {
	Delivery domain.HookDelivery
	Todo     *domain.Todo
}

func hookTodo(h domain.Hook, id, queue, title, kind, source, key string, payload json.RawMessage, now time.Time) *domain.Todo {
	return &domain.Todo{ID: id, AgentID: h.AgentID, Queue: queue, Title: title, Payload: payload, Kind: kind, Source: source,
		IdempotencyKey: TodoKey(h.ID, key), PushEligible: true, CreatedBy: "hook:" + h.ID, State: domain.TodoPending,
		MaxAttempts: domain.DefaultMaxAttempts, CreatedAt: now, UpdatedAt: now}
}

// ReadGitHub reads a verified GitHub delivery to h (its headers and the
// verified payload) at now: the X-GitHub-Delivery key and the event, then
// ping, an event or action not taken, the filter, and otherwise the todo:
// its title rendered from h.TitleTemplate, its kind h.KindLabel or the
// event, its payload the Event and the delivery id. A *Refusal says why
// the delivery is refused.
func ReadGitHub(h domain.Hook, header http.Header, payload []byte, now time.Time, newID func() string) (Verified, *Refusal) {
	key, event := header.Get(HeaderGitHubDelivery), header.Get(HeaderGitHubEvent)
	if err := deliveryKey("X-GitHub-Delivery", key); err != nil {
		return Verified{}, &Refusal{"no delivery id", err}
	}
	if err := domain.ValidateCode("event", event); err != nil || event == "" {
		return Verified{}, &Refusal{"no event", domain.Errorf(domain.CodeInvalidArgument, "the X-GitHub-Event header must name an event")}
	}
	ev, known, err := DecodeGitHub(event, payload)
	if err != nil {
		return Verified{}, &Refusal{"body is not a " + event + " event", domain.Errorf(domain.CodeInvalidArgument, "the body is not a valid %s event", event)}
	}
	v := Verified{Delivery: domain.HookDelivery{ID: newID(), HookID: h.ID, Key: key, Event: ev.Event, Action: ev.Action, ReceivedAt: now}}
	d := &v.Delivery
	switch {
	case event == "ping":
		d.Outcome = domain.DeliveryPing
	case !known || !ev.Supported():
		d.Outcome, d.Reason = domain.DeliveryIgnored, "event or action not taken"
	default:
		if ok, why := Match(h.Filter, ev); !ok {
			d.Outcome, d.Reason = domain.DeliveryIgnored, why
			break
		}
		body, _ := json.Marshal(struct {
			Event
			Delivery string `json:"delivery"`
		}{ev, key})
		kind := h.KindLabel
		if kind == "" {
			kind = ev.Event
		}
		d.Outcome = domain.DeliveryCreated
		v.Todo = hookTodo(h, newID(), h.Queue, Render(h.TitleTemplate, ev), kind, domain.HookGitHub, key, body, now)
	}
	return v, nil
}

// StandardKey returns the webhook-id of a verified Standard Webhooks
// delivery, or the refusal of a missing or malformed one.
func StandardKey(header http.Header) (string, *Refusal) {
	key := header.Get(HeaderStandardID)
	if err := deliveryKey("webhook-id", key); err != nil {
		return "", &Refusal{"bad webhook-id", err}
	}
	return key, nil
}

// ReadStandard makes the todo of a verified Standard Webhooks delivery to
// h with the id key and the decoded body, for the hook's agent a (read
// after the body decoded): the body's queue (in a's scope) or the hook's,
// the body's kind or h.KindLabel, the body's payload. A *Refusal says why
// the delivery is refused.
func ReadStandard(h domain.Hook, a domain.Agent, key string, body StandardBody, now time.Time, newID func() string) (Verified, *Refusal) {
	queue := h.Queue
	if body.Queue != "" {
		if !a.Scope.HasQueue(body.Queue) {
			return Verified{}, &Refusal{"queue not in scope", domain.Errorf(domain.CodeInvalidArgument, "queue %q is not in the agent's scope", body.Queue).At("/queue")}
		}
		queue = body.Queue
	}
	kind := body.Kind
	if kind == "" {
		kind = h.KindLabel
	}
	if err := domain.ValidateCode("kind", kind); err != nil {
		return Verified{}, &Refusal{"bad kind", err}
	}
	if err := domain.ValidateJSON("payload", body.Payload, domain.MaxPayloadLen); err != nil {
		return Verified{}, &Refusal{"bad payload", err}
	}
	d := domain.HookDelivery{ID: newID(), HookID: h.ID, Key: key, Event: kind, Outcome: domain.DeliveryCreated, ReceivedAt: now}
	return Verified{Delivery: d, Todo: hookTodo(h, newID(), queue, Safe(body.Title, "webhook delivery"), kind, StandardSource, key, body.Payload, now)}, nil
}
