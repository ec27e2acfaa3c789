package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/strictjson"
)

// argKind is the JSON type a tool argument must have.
type argKind int

const (
	kindString  argKind = iota // a JSON string
	kindInteger                // a JSON number with an integral value (int64)
	kindAny                    // any JSON value
	kindObject                 // a JSON object of the field's members (field.members)
)

// field is one argument of a tool. The input schema, the strict decoder and
// the error pointers all come from this one description, and the decoder
// enforces everything the schema says: a present value is checked even
// when it is the zero value (0 or "" is not the same as absent).
type field struct {
	name     string
	kind     argKind
	required bool
	desc     string
	enum     []string // strings only: the allowed values
	min, max int64    // integers only, when max > 0: the inclusive bounds
	members  []field  // objects only: the members, checked as a verb's arguments are
}

// String arguments are never empty when present (schema minLength 1): an
// empty todo_id, queue or state is a mistake, not "absent".

// verb is one tool of the registry: a scope verb (granted per agent) or a
// self verb (design: Self verbs; listed in every session after the scope verbs).
type verb struct {
	name     string
	title    string
	desc     string
	readOnly bool
	fields   []field
	// call runs the verb for the authenticated agent with decoded,
	// type-checked arguments and returns the value to report.
	call func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error)
}

// todoList is the result of list_todos (structuredContent must be an object).
// Truncated says the todos stop early because their JSON reached
// app.MaxPageBytes (design: Paging): the result is sent twice in a tool
// answer (text and structuredContent), so it stays bounded whatever the
// payloads; narrow with queue, state or limit to see the rest.
type todoList struct {
	Todos     []domain.Todo `json:"todos"`
	Truncated bool          `json:"truncated,omitempty"`
}

// boundedTodoList keeps the todos, in order, while their JSON stays within
// app.MaxPageBytes (at least one).
func boundedTodoList(ts []domain.Todo) todoList {
	size := 0
	for i, t := range ts {
		b, err := json.Marshal(t)
		if err != nil {
			continue
		}
		if size += len(b) + 1; size > app.MaxPageBytes && i > 0 {
			return todoList{Todos: ts[:i], Truncated: true}
		}
	}
	return todoList{Todos: ts}
}

var (
	fTodoID = field{name: "todo_id", kind: kindString, required: true, desc: "Id of the todo (meta.todo_id of its doorbell)."}
	fLease  = field{name: "lease_seconds", kind: kindInteger, min: 1, max: int64(domain.MaxLease.Seconds()),
		desc: "Lease length in seconds; default 300, at most 86400."}
	fQueue = field{name: "queue", kind: kindString, desc: "One of your queues; default all of them."}
	fN     = field{name: "n", kind: kindInteger, min: 1, max: domain.MaxClaimBatch,
		desc: "Claim up to this many todos at once (1 to 32), each under its own lease; the answer is then {\"todos\": [...]}, oldest first, empty when nothing is claimable."}
	// fNext is complete's and fail's next claim (design: Complete and claim the next).
	fNext = field{name: "next", kind: kindObject, members: []field{fQueue, fLease, fN},
		desc: "Also claim your next todo in the same step: {} for the oldest claimable one in any of your queues, or {queue, lease_seconds, n}. The answer is then {\"todo\": <this todo>, \"next\": [<claimed todos, oldest first; empty when none>]}; nothing is claimed if this call fails."}
)

// nextClaim reads the next argument (fNext) of complete or fail; ok is
// false when it is absent.
func nextClaim(in args) (c app.NextClaim, ok bool) {
	raw := in.raw("next")
	if raw == nil {
		return app.NextClaim{}, false
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	sub := args(m)
	return app.NextClaim{Queue: sub.str("queue"), LeaseSeconds: sub.int("lease_seconds"), N: sub.int("n")}, true
}

// finished is the answer of complete or fail with next: the todo finished
// and the todos claimed after it (never null).
type finished struct {
	Todo domain.Todo   `json:"todo"`
	Next []domain.Todo `json:"next"`
}

func finishedResult(t domain.Todo, next []domain.Todo, err error) (any, error) {
	if next == nil {
		next = []domain.Todo{}
	}
	return finished{Todo: t, Next: next}, err
}

// scopeVerbs are the grantable verbs, in domain.ScopeVerbs order (design: MCP sessions).
var scopeVerbs = []verb{
	{
		name: domain.VerbListTodos, title: "List todos", readOnly: true,
		desc: "List your todos in your queues (or one of them), oldest first. Returns {\"todos\": [...]}, with \"truncated\": true when the todos' JSON passed 4 MiB (narrow with queue, state or limit).",
		fields: []field{
			fQueue,
			{name: "state", kind: kindString, enum: []string{domain.TodoPending, domain.TodoClaimed, domain.TodoDone, domain.TodoFailed}, desc: "Only todos in this state."},
			{name: "limit", kind: kindInteger, min: 1, max: domain.MaxListLimit, desc: "At most this many todos; default 50, at most 500."},
		},
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error) {
			ts, err := svc.AgentListTodos(ctx, a, app.TodoFilter{Queue: in.str("queue"), State: in.str("state"), Limit: int(in.int("limit"))})
			if ts == nil {
				ts = []domain.Todo{}
			}
			return boundedTodoList(ts), err
		},
	},
	{
		name: domain.VerbClaim, title: "Claim a todo",
		desc:   "Claim the todo a doorbell named (meta.todo_id) and hold it under a lease. Errors: not_found (not yours), conflict (already claimed, finished or waiting for a retry).",
		fields: []field{fTodoID, fLease},
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error) {
			return svc.Claim(ctx, a, in.str("todo_id"), in.int("lease_seconds"))
		},
	},
	{
		name: domain.VerbClaimNext, title: "Claim the next todo",
		desc:   "Claim the oldest claimable todo in the queue (or any of your queues). Errors: not_found when nothing is claimable; use it to drain a digest doorbell. With n, claim up to n at once and get {\"todos\": [...]} (empty, not an error, when nothing is claimable).",
		fields: []field{fQueue, fLease, fN},
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error) {
			if in.raw("n") == nil {
				return svc.ClaimNext(ctx, a, in.str("queue"), in.int("lease_seconds"))
			}
			ts, err := svc.ClaimNextN(ctx, a, app.NextClaim{Queue: in.str("queue"), LeaseSeconds: in.int("lease_seconds"), N: in.int("n")})
			if ts == nil {
				ts = []domain.Todo{}
			}
			return todoList{Todos: ts}, err
		},
	},
	{
		name: domain.VerbRenew, title: "Renew a lease",
		desc:   "Extend the lease of a todo you hold, from now. Errors: conflict when you no longer hold it under a live lease.",
		fields: []field{fTodoID, fLease},
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error) {
			return svc.Renew(ctx, a, in.str("todo_id"), in.int("lease_seconds"))
		},
	},
	{
		name: domain.VerbComplete, title: "Complete a todo",
		desc: "Mark a todo you hold done, with an optional result. With next, also claim your next todo(s) in the same step.",
		fields: []field{fTodoID,
			{name: "result", kind: kindAny, desc: "Any JSON value reporting the outcome (at most 64 KiB)."}, fNext},
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error) {
			if c, ok := nextClaim(in); ok {
				return finishedResult(svc.CompleteAndClaim(ctx, a, in.str("todo_id"), in.raw("result"), c))
			}
			return svc.Complete(ctx, a, in.str("todo_id"), in.raw("result"))
		},
	},
	{
		name: domain.VerbFail, title: "Fail a todo",
		desc: "Give up on a todo you hold: it is retried later with backoff, and dead-lettered after its last attempt. With next, also claim your next todo(s) in the same step.",
		fields: []field{fTodoID,
			{name: "reason", kind: kindString, desc: "Why it failed (at most 2000 bytes)."}, fNext},
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error) {
			if c, ok := nextClaim(in); ok {
				return finishedResult(svc.FailAndClaim(ctx, a, in.str("todo_id"), in.str("reason"), c))
			}
			return svc.Fail(ctx, a, in.str("todo_id"), in.str("reason"))
		},
	},
	{
		// Listed only to agents with handoff grants (Scope.HasVerb).
		name: domain.VerbHandOff, title: "Hand off a todo",
		desc: "Push a todo to another agent of your owner, in a queue your scope grants for it. Returns {todo, created}. Errors: invalid_argument when to/queue is not granted (the detail lists the grants).",
		fields: []field{
			{name: "to", kind: kindString, required: true, desc: "Handle or id of the agent to hand the todo to."},
			{name: "queue", kind: kindString, required: true, desc: "The queue granted for that agent."},
			{name: "title", kind: kindString, required: true, desc: "One line saying what to do (at most 500 bytes)."},
			{name: "payload", kind: kindAny, desc: "Any JSON value with the details (at most 64 KiB)."},
			{name: "idempotency_key", kind: kindString, desc: "Handing off twice with one key while the todo is live returns the first todo."},
		},
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error) {
			return svc.HandOff(ctx, a, app.HandOffInput{To: in.str("to"), Queue: in.str("queue"), Title: in.str("title"),
				Payload: in.raw("payload"), IdempotencyKey: in.str("idempotency_key")})
		},
	},
}

// selfVerbs are listed after the scope verbs in every session and callable
// whatever the scope (design: Self verbs: clock_in, clock_out, presence). They
// take no agent, queue or todo argument (a test fails if one does).
var selfVerbs = []verb{
	{
		name: "clock_in", title: "Clock in",
		desc:   "Start working now: if your shift says you are off, you are in until the earlier of now+for and your next shift start (for: a duration like \"2h\", default 1h, at most 8h); otherwise any clock-out is cleared. Returns {presence, source, until, shift, pending}.",
		fields: []field{{name: "for", kind: kindString, desc: "How long to stay in, Go duration syntax (\"90m\", \"2h\"); default 1h, at most 8h."}},
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, in args) (any, error) {
			var forArg *string
			if _, ok := in["for"]; ok {
				f := in.str("for")
				forArg = &f
			}
			return svc.ClockIn(ctx, a, forArg)
		},
	},
	{
		name: "clock_out", title: "Clock out",
		desc: "Stop receiving doorbells: you are out until your next shift start (with no shift, until you clock in or your owner changes it). Pull verbs keep working. Returns {presence, source, until, shift, pending}.",
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, _ args) (any, error) {
			return svc.ClockOut(ctx, a)
		},
	},
	{
		name: "presence", title: "Presence", readOnly: true,
		desc: "Your presence: {presence: in|out, source: agent|operator|shift|default, until (next change or null), shift, pending (todos waiting for you)}.",
		call: func(ctx context.Context, svc *app.Service, a *domain.Agent, _ args) (any, error) {
			return svc.PresenceOf(ctx, a)
		},
	},
}

// allVerbs returns the registry in tools/list order.
func allVerbs() []verb { return slices.Concat(scopeVerbs, selfVerbs) }

// isSelf reports whether name is a self verb.
func isSelf(name string) bool {
	return slices.ContainsFunc(selfVerbs, func(v verb) bool { return v.name == name })
}

// inputSchema renders the verb's JSON Schema: an object with exactly the
// verb's properties (additionalProperties false).
func (v *verb) inputSchema() json.RawMessage {
	b, err := json.Marshal(objectSchema(v.fields))
	if err != nil {
		panic("mcpserver: schema of " + v.name + ": " + err.Error())
	}
	return b
}

// objectSchema is the JSON Schema of an object with exactly fields as its
// properties (additionalProperties false).
func objectSchema(fields []field) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, f := range fields {
		p := map[string]any{"description": f.desc}
		switch f.kind {
		case kindString:
			p["type"] = "string"
			p["minLength"] = 1
			if len(f.enum) > 0 {
				p["enum"] = f.enum
			}
		case kindInteger:
			p["type"] = "integer"
			if f.max > 0 {
				p["minimum"], p["maximum"] = f.min, f.max
			}
		case kindObject:
			p = objectSchema(f.members)
			p["description"] = f.desc
		}
		props[f.name] = p
		if f.required {
			required = append(required, f.name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

// mcpTool renders the verb as an MCP tool definition.
func (v *verb) mcpTool() mcp.Tool {
	f := false
	t := mcp.Tool{
		Name: v.name, Title: v.title, Description: v.desc, RawInputSchema: v.inputSchema(),
		Annotations: mcp.ToolAnnotation{Title: v.title, ReadOnlyHint: &v.readOnly, OpenWorldHint: &f},
	}
	if !v.readOnly {
		t.Annotations.DestructiveHint = &f
	}
	return t
}

// args are a tool call's arguments after decodeArgs checked every member's
// name and JSON type. Absent and null members read as zero values.
type args map[string]json.RawMessage

func (a args) str(name string) string {
	var s string
	_ = json.Unmarshal(a[name], &s)
	return s
}

func (a args) int(name string) int64 {
	n, _ := parseInteger(a[name])
	return n
}

func (a args) raw(name string) json.RawMessage { return a[name] }

// decodeArgs checks raw tool arguments against the verb's fields: they must
// be a JSON object (or absent, or null) whose members are all known, given
// once, of the declared type and within the declared bounds (enum, minimum
// and maximum, non-empty strings), with required ones present. A null
// member is absent. Errors are invalid_argument with the member's RFC 6901
// pointer.
func (v *verb) decodeArgs(raw json.RawMessage) (args, error) {
	raw = bytes.TrimSpace(raw)
	in := args{}
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if raw[0] != '{' {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "the arguments of %s must be a JSON object", v.name)
		}
		m, err := members(v.name, v.fields, "", raw)
		if err != nil {
			return nil, err
		}
		in = m
	}
	if err := checkFields(v.name, v.fields, "", in); err != nil {
		return nil, err
	}
	return in, nil
}

// checkFields checks the members in of an object at pointer base against
// fields: required ones present, present ones of their field's schema
// (field.check; an object's members in turn).
func checkFields(tool string, fields []field, base string, in args) error {
	for _, f := range fields {
		val, ok := in[f.name]
		ptr := strictjson.Member(base, f.name)
		if !ok {
			if f.required {
				return domain.Errorf(domain.CodeInvalidArgument, "%s is required", f.name).At(ptr)
			}
			continue
		}
		if err := f.check(val); err != nil {
			return err.At(ptr)
		}
		if f.kind == kindObject {
			sub, err := members(tool, f.members, ptr, val)
			if err == nil {
				err = checkFields(tool, f.members, ptr, sub)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// members reads the members of a JSON object at pointer base in document
// order with the strict-JSON layer (strictjson.Tool words the errors),
// refusing the first unknown or repeated one; null members are left out.
func members(tool string, fields []field, base string, raw json.RawMessage) (args, error) {
	known := make([]string, 0, len(fields))
	for _, f := range fields {
		known = append(known, f.name)
	}
	in := args{}
	err := strictjson.Object(raw, strictjson.Tool(tool), base, known, func(k string, val []byte) error {
		if !bytes.Equal(val, []byte("null")) {
			in[k] = val
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return in, nil
}

// check refuses a present value that the field's schema does not allow.
// The caller adds the pointer.
func (f *field) check(val json.RawMessage) *domain.Error {
	switch f.kind {
	case kindString:
		var s string
		if val[0] != '"' || json.Unmarshal(val, &s) != nil {
			return domain.Errorf(domain.CodeInvalidArgument, "%s must be a string", f.name)
		}
		if s == "" {
			return domain.Errorf(domain.CodeInvalidArgument, "%s must not be empty; omit it instead", f.name)
		}
		if len(f.enum) > 0 && !slices.Contains(f.enum, s) {
			return domain.Errorf(domain.CodeInvalidArgument, "%s %s must be one of %s", f.name, quoteArg(s), strings.Join(f.enum, ", "))
		}
	case kindObject:
		if val[0] != '{' {
			return domain.Errorf(domain.CodeInvalidArgument, "%s must be a JSON object", f.name)
		}
	case kindInteger:
		n, ok := parseInteger(val)
		if !ok {
			return domain.Errorf(domain.CodeInvalidArgument, "%s must be an integer", f.name)
		}
		if f.max > 0 && (n < f.min || n > f.max) {
			return domain.Errorf(domain.CodeInvalidArgument, "%s must be between %d and %d, got %d; omit it for the default", f.name, f.min, f.max, n)
		}
	}
	return nil
}

// quoteArg quotes an argument value for a detail, shortened to 100 bytes.
func quoteArg(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strconv.Quote(s)
}

// parseInteger accepts a JSON number with an integral value that fits in an
// int64 (so 300 and 300.0, not 1.5, "300" or 1e30).
func parseInteger(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// toolHandler adapts a verb to mcp-go: the agent comes from the request
// context (set by ServeHTTP after authentication), arguments are decoded
// strictly, and every failure is a tool result with isError (MCP: tool
// execution errors are results, so the model can read and correct them).
func (s *Server) toolHandler(v verb) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("mcp tool panicked", "tool", v.name, "panic", r, "stack", string(debug.Stack()))
				res, err = errorResult(&domain.Error{Code: domain.CodeInternal, Detail: "internal error"}), nil
			}
		}()
		p := principalFrom(ctx)
		if p == nil || p.Agent == nil {
			return errorResult(&domain.Error{Code: domain.CodeUnauthenticated, Detail: "no authenticated agent"}), nil
		}
		if !isSelf(v.name) && !p.Agent.Scope.HasVerb(v.name) {
			// Unreachable through mcp-go (the tool filter hides it), kept so
			// the scope holds even if the filter is bypassed.
			return errorResult(domain.Errorf(domain.CodeForbidden, "verb %s is not in this agent's scope", v.name)), nil
		}
		raw := req.Params.RawArguments
		if len(raw) == 0 && req.Params.Arguments != nil {
			if raw, err = json.Marshal(req.Params.Arguments); err != nil {
				return errorResult(domain.Errorf(domain.CodeInvalidArgument, "arguments are not JSON")), nil
			}
		}
		in, err := v.decodeArgs(raw)
		if err != nil {
			return errorResult(err), nil
		}
		out, err := v.call(ctx, s.svc, p.Agent, in)
		if err != nil {
			de, ok := asDomainError(err)
			if !ok {
				s.log.Error("mcp tool failed", "tool", v.name, "agent_id", p.Agent.ID, "err", err)
			}
			return errorResult(de), nil
		}
		return okResult(out)
	}
}

// toolError is the JSON text of an isError tool result: domain.Error's fields.
type toolError struct {
	Code    domain.Code `json:"code"`
	Detail  string      `json:"detail"`
	Pointer string      `json:"pointer,omitempty"`
	Reason  string      `json:"reason,omitempty"`
}

func errorResult(err error) *mcp.CallToolResult {
	de, _ := asDomainError(err)
	b, _ := json.Marshal(toolError{Code: de.Code, Detail: de.Detail, Pointer: de.Pointer, Reason: de.Reason})
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(string(b))},
		StructuredContent: json.RawMessage(b),
		IsError:           true,
	}
}

func okResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: encoding tool result: %w", err)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(string(b))},
		StructuredContent: json.RawMessage(b),
	}, nil
}

// filterTools is mcp-go's tool filter, applied to tools/list and to every
// tools/call: it keeps the scope verbs the agent was granted, in
// domain.ScopeVerbs order, then the self verbs. mcp-go sorts tools by name
// before filtering; the filter restores the registry order.
func (s *Server) filterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	p := principalFrom(ctx)
	if p == nil || p.Agent == nil {
		return nil
	}
	byName := make(map[string]mcp.Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	out := make([]mcp.Tool, 0, len(tools))
	for _, v := range allVerbs() {
		t, ok := byName[v.name]
		if !ok {
			continue
		}
		if isSelf(v.name) || p.Agent.Scope.HasVerb(v.name) {
			out = append(out, t)
		}
	}
	return out
}
