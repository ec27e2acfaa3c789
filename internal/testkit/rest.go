package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// HTTP is the client of REST: every request is bounded by Wait.
var HTTP = &http.Client{Timeout: Wait}

// REST sends method path to base with token as bearer token; a body that
// is not nil goes as JSON. A JSON answer is decoded into into when it is
// not nil. It returns the status, or 0 and the error when the request
// failed; err is also set when into is given and the answer is not JSON.
func REST(base, token, method, path string, body, into any) (int, error) {
	status, b, err := harness.SendJSON(context.Background(), HTTP, method, base+path, "Authorization", "Bearer "+token, body)
	if err != nil {
		return status, err
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			return status, fmt.Errorf("%s %s: %d, not JSON: %v\n%s", method, path, status, err, b)
		}
	}
	return status, nil
}

// Vended is an agent as POST /v1/agents and `rollcall agent vend --json`
// return it.
type Vended = harness.Vended

// WorkVerbs are the MCP verbs of an agent that works its queues.
var WorkVerbs = harness.WorkVerbs
