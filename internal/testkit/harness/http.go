package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// SendJSON sends method url through hc with the header hdr: value and body
// as JSON (when not nil), and returns the status and the answer's body; a
// request that failed is status 0 and the error.
func SendJSON(ctx context.Context, hc *http.Client, method, url, hdr, value string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set(hdr, value)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// DoJSON sends method path to base through hc with token as bearer token
// and body as JSON (SendJSON) and decodes a 2xx answer into into (when not
// nil); another status is an error naming it and the answer.
func DoJSON(ctx context.Context, hc *http.Client, base, token, method, path string, body, into any) error {
	status, b, err := SendJSON(ctx, hc, method, base+path, "Authorization", "Bearer "+token, body)
	if err != nil {
		return err
	}
	if status >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, status, b)
	}
	if into != nil {
		return json.Unmarshal(b, into)
	}
	return nil
}

// Vended is an agent as POST /v1/agents and `rollcall agent vend --json`
// return it.
type Vended struct {
	Agent struct {
		ID     string `json:"id"`
		Handle string `json:"handle"`
	} `json:"agent"`
	Credential   string `json:"credential"`
	MCPURL       string `json:"mcp_url"`
	ClaudeMCPAdd string `json:"claude_mcp_add"`
}

// WorkVerbs are the MCP verbs of an agent that works its queues.
var WorkVerbs = []string{"list_todos", "claim", "claim_next", "renew", "complete", "fail"}

// Vend vends handle on queues with the WorkVerbs (POST /v1/agents, as an
// admin with token; DoJSON).
func Vend(ctx context.Context, hc *http.Client, base, token, handle string, queues []string) (Vended, error) {
	var v Vended
	err := DoJSON(ctx, hc, base, token, "POST", "/v1/agents", map[string]any{"handle": handle, "queues": queues, "verbs": WorkVerbs}, &v)
	return v, err
}
