package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// HTTP is the client of REST: every request is bounded by Wait.
var HTTP = &http.Client{Timeout: Wait}

// REST sends method path to base with token as bearer token; a body that
// is not nil goes as JSON. A JSON answer is decoded into into when it is
// not nil. It returns the status, or 0 and the error when the request
// failed; err is also set when into is given and the answer is not JSON.
func REST(base, token, method, path string, body, into any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d, not JSON: %v\n%s", method, path, resp.StatusCode, err, b)
		}
	}
	return resp.StatusCode, nil
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
