package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/rollcall/rollcall/internal/strictjson"
)

// Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	HeaderStandardID        = standardwebhooks.HeaderWebhookID        // "webhook-id"
	HeaderStandardTimestamp = standardwebhooks.HeaderWebhookTimestamp // "webhook-timestamp", unix seconds
	HeaderStandardSignature = standardwebhooks.HeaderWebhookSignature // "webhook-signature", "v1,<base64>" space-separated
)

// VerifyStandard checks a Standard Webhooks delivery with the spec's Go
// library: the signature (v1, HMAC-SHA256 of "<id>.<timestamp>.<body>"
// under the base64 key of secret "whsec_…") first, then the timestamp
// against now with Tolerance in either direction (the library's own check
// reads the wall clock, so Rollcall checks with its injected clock).
// Errors: ErrUnsigned (a required header missing), ErrBadSignature,
// ErrStale.
func VerifyStandard(secret string, h http.Header, body []byte, now time.Time) error {
	if h.Get(HeaderStandardID) == "" || h.Get(HeaderStandardTimestamp) == "" || h.Get(HeaderStandardSignature) == "" {
		return ErrUnsigned
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("intake: the hook's secret is not a Standard Webhooks key: %w", err)
	}
	if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
		return ErrBadSignature
	}
	sec, err := strconv.ParseInt(h.Get(HeaderStandardTimestamp), 10, 64)
	if err != nil {
		return ErrBadSignature // unreachable: the library parsed it
	}
	ts := time.Unix(sec, 0)
	if now.Sub(ts) > Tolerance || ts.Sub(now) > Tolerance {
		return ErrStale
	}
	return nil
}

// StandardBody is the JSON body of a Standard Webhooks delivery that makes
// a todo: {title, queue?, kind?, payload?} (design: Hook signatures).
type StandardBody struct {
	Title   string          `json:"title"`
	Queue   string          `json:"queue,omitempty"`
	Kind    string          `json:"kind,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// DecodeStandard decodes a verified Standard Webhooks body strictly: one
// JSON object with only the members of StandardBody, title a non-empty
// string, no member name repeated in one object (also in another letter
// case) outside the free-form payload, which is kept as sent, not matched
// to fields. Errors: ErrBody wrapping what is wrong.
func DecodeStandard(body []byte) (StandardBody, error) {
	var b StandardBody
	// One reading of a body (design: see that heading): encoding/json would take
	// the last of a repeated name, in any letter case.
	if err := strictjson.CheckNames(body, "/payload"); err != nil {
		return StandardBody{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return StandardBody{}, fmt.Errorf("%w: %v", ErrBody, err)
	}
	if dec.More() {
		return StandardBody{}, fmt.Errorf("%w: data after the JSON object", ErrBody)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return StandardBody{}, fmt.Errorf("%w: data after the JSON object", ErrBody)
	}
	if bytes.TrimSpace(body)[0] != '{' {
		return StandardBody{}, fmt.Errorf("%w: the body must be a JSON object", ErrBody)
	}
	if b.Title == "" {
		return StandardBody{}, fmt.Errorf("%w: title is required", ErrBody)
	}
	if bytes.Equal(bytes.TrimSpace(b.Payload), []byte("null")) {
		b.Payload = nil
	}
	return b, nil
}
