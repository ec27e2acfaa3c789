package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeAnthropic is a scripted stand-in for the Anthropic Messages API on
// loopback, for the real Claude Code binary (claudecode_e2e_test.go). It
// answers POST /v1/messages with a streamed response (SSE events
// message_start, content_block_start/delta/stop, message_delta,
// message_stop, as the real API does; JSON when stream is false) chosen
// from the conversation alone:
//
//   - the last user turn holds a <channel …> tag with todo_id="X" → tool_use
//     <prefix>__claim {todo_id: X};
//   - a <channel …> tag without todo_id (a digest) → <prefix>__claim_next {};
//   - a tool_result of claim (or of claim_next holding a todo) → complete
//     that todo;
//   - a tool_result of complete after a digest → claim_next again;
//   - anything else (the first prompt, a claim_next answering not_found,
//     Claude Code's side requests) → the text "ok", end_turn.
//
// The MCP tool names are taken from the request's tools when listed there,
// else built from the prefix given for the scenario (Claude Code defers MCP
// tools behind ToolSearch, and a direct call by full name works).
type fakeAnthropic struct {
	URL string
	srv *http.Server

	mu       sync.Mutex
	prefixes []string // tool name prefixes, e.g. mcp__rollcall-e2e
	channels []string // every <channel …> opening tag seen, in order
	seen     map[string]bool
	calls    []string // tool calls the model made: "<tool> <todo_id>"
	requests int
	bodies   []string // the last requests, for the log of a failed test
}

func startFakeAnthropic(t *testing.T, prefixes ...string) *fakeAnthropic {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAnthropic{URL: "http://" + ln.Addr().String(), prefixes: prefixes}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve)}
	go f.srv.Serve(ln)
	t.Cleanup(func() {
		f.srv.Close()
		if t.Failed() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if d := os.Getenv("ROLLCALL_FAKE_API_DUMP"); d != "" {
				os.WriteFile(d, []byte(strings.Join(f.bodies, "\n")), 0o644)
			}
			for i, b := range f.bodies {
				if len(b) > 4000 {
					b = b[:1000] + " … " + b[len(b)-3000:]
				}
				t.Logf("fake API request %d of the last %d:\n%s", i+1, len(f.bodies), b)
			}
		}
	})
	return f
}

// Channels returns the <channel …> tags the model was shown so far.
func (f *fakeAnthropic) Channels() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.channels...)
}

// Calls returns the tool calls the model made so far ("claim <id>", …).
func (f *fakeAnthropic) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type anthMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func blocks(raw json.RawMessage) []anthBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthBlock{{Type: "text", Text: s}}
	}
	var bs []anthBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// text flattens a block's text, including a tool_result's content.
func (b anthBlock) text() string {
	if b.Type != "tool_result" {
		return b.Text
	}
	var parts []string
	for _, c := range blocks(b.Content) {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

var (
	channelTagRE = regexp.MustCompile(`<channel\s[^>]*>`)
	todoIDAttrRE = regexp.MustCompile(`\btodo_id="([^"]+)"`) // not oldest_todo_id, a digest's attribute
	jsonIDRE     = regexp.MustCompile(`"id"\s*:\s*"([^"]+)"`)
)

type toolCall struct {
	tool  string // claim, claim_next, complete
	input map[string]any
}

func (f *fakeAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":100}`)
		return
	}
	var req struct {
		Model    string        `json:"model"`
		Stream   bool          `json:"stream"`
		Messages []anthMessage `json:"messages"`
		Tools    []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	if len(f.bodies) > 6 {
		f.bodies = f.bodies[1:]
	}
	f.mu.Unlock()
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	tools := map[string]bool{}
	for _, t := range req.Tools {
		tools[t.Name] = true
	}
	call := f.decide(req.Messages)
	var content []map[string]any
	stop := "end_turn"
	if call != nil {
		name := f.toolName(call.tool, tools)
		content = []map[string]any{{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", f.nextID()), "name": name, "input": call.input}}
		stop = "tool_use"
		f.mu.Lock()
		id, _ := call.input["todo_id"].(string)
		f.calls = append(f.calls, strings.TrimSpace(call.tool+" "+id))
		f.mu.Unlock()
	} else {
		content = []map[string]any{{"type": "text", "text": "ok"}}
	}
	model := req.Model
	if model == "" {
		model = "claude-sonnet-4-5"
	}
	msgID := fmt.Sprintf("msg_%d", f.nextID())
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	ev := func(name string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if fl != nil {
			fl.Flush()
		}
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": msgID, "type": "message",
		"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
	for i, c := range content {
		if c["type"] == "tool_use" {
			in, _ := json.Marshal(c["input"])
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		} else {
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": c["text"]}})
		}
		ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 10}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

func (f *fakeAnthropic) nextID() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	return f.requests
}

// toolName is the full name of an MCP tool: one listed in the request, else
// built from the first prefix.
func (f *fakeAnthropic) toolName(tool string, listed map[string]bool) string {
	for _, p := range f.prefixes {
		if listed[p+"__"+tool] {
			return p + "__" + tool
		}
	}
	for name := range listed {
		if strings.HasPrefix(name, "mcp__") && strings.HasSuffix(name, "__"+tool) {
			return name
		}
	}
	return f.prefixes[0] + "__" + tool
}

// decide picks the next tool call from the conversation (nil = answer text).
func (f *fakeAnthropic) decide(msgs []anthMessage) *toolCall {
	// Claude Code may end the list with role "system" messages (the date).
	for len(msgs) > 0 && msgs[len(msgs)-1].Role == "system" {
		msgs = msgs[:len(msgs)-1]
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return nil
	}
	last := blocks(msgs[len(msgs)-1].Content)
	// The newest channel tag of the conversation: the doorbell being worked.
	var tag string
	for i, m := range msgs {
		if m.Role != "user" {
			continue
		}
		for _, b := range blocks(m.Content) {
			for _, tg := range channelTagRE.FindAllString(b.text(), -1) {
				f.seeChannel(strconv.Itoa(i), tg)
				tag = tg
			}
		}
	}
	// A tool result: continue the flow of the tool it answers.
	for _, b := range last {
		if b.Type != "tool_result" {
			continue
		}
		use := findToolUse(msgs, b.ToolUseID)
		if use == nil {
			return nil
		}
		tool := use.Name[strings.LastIndex(use.Name, "__")+2:]
		var in map[string]any
		_ = json.Unmarshal(use.Input, &in)
		switch tool {
		case "claim":
			return &toolCall{"complete", map[string]any{"todo_id": in["todo_id"], "result": map[string]any{"by": "fake model"}}}
		case "claim_next":
			if m := jsonIDRE.FindStringSubmatch(b.text()); m != nil && !strings.Contains(b.text(), `"not_found"`) {
				return &toolCall{"complete", map[string]any{"todo_id": m[1], "result": map[string]any{"by": "fake model"}}}
			}
			return nil
		case "complete":
			if tag != "" && !todoIDAttrRE.MatchString(tag) {
				return &toolCall{"claim_next", map[string]any{}}
			}
			return nil
		}
		return nil
	}
	// A new user turn: a doorbell in it starts a flow.
	for _, b := range last {
		tags := channelTagRE.FindAllString(b.text(), -1)
		if len(tags) == 0 {
			continue
		}
		tg := tags[len(tags)-1]
		if m := todoIDAttrRE.FindStringSubmatch(tg); m != nil {
			return &toolCall{"claim", map[string]any{"todo_id": m[1]}}
		}
		return &toolCall{"claim_next", map[string]any{}}
	}
	return nil
}

// seeChannel records a tag once per message of the conversation: a conversation is resent whole with every request, and
// two doorbells with equal tags are still two.
func (f *fakeAnthropic) seeChannel(pos, tag string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	if f.seen[pos+" "+tag] {
		return
	}
	f.seen[pos+" "+tag] = true
	f.channels = append(f.channels, tag)
}

func findToolUse(msgs []anthMessage, id string) *anthBlock {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		for _, b := range blocks(msgs[i].Content) {
			if b.Type == "tool_use" && b.ID == id {
				return &b
			}
		}
	}
	return nil
}
