package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/domain"
)

// The definitions as they stood in internal/app before they moved here,
// copied verbatim: the JSON the API speaks must not change with the move.
type (
	oldVendInput struct {
		Handle       string            `json:"handle"`
		Name         string            `json:"name,omitempty"`
		Queues       []string          `json:"queues"`
		Verbs        []string          `json:"verbs"`
		BillingMode  string            `json:"billing_mode,omitempty"`
		BillingModes []string          `json:"billing_modes,omitempty"`
		ToolClass    string            `json:"tool_class,omitempty"`
		Handoff      []oldHandoffInput `json:"handoff,omitempty"`
	}
	oldHandoffInput struct {
		Agent string `json:"agent"`
		Queue string `json:"queue"`
	}
	oldVendResult struct {
		Agent        domain.Agent `json:"agent"`
		Credential   string       `json:"credential"`
		MCPURL       string       `json:"mcp_url"`
		ClaudeMCPAdd string       `json:"claude_mcp_add"`
	}
	oldUpdateInput struct {
		Name           *string   `json:"name,omitempty"`
		BillingMode    *string   `json:"billing_mode,omitempty"`
		BillingModes   *[]string `json:"billing_modes,omitempty"`
		ToolClass      *string   `json:"tool_class,omitempty"`
		Active         *bool     `json:"active,omitempty"`
		Owner          *string   `json:"owner,omitempty"`
		SelfClockInCap *string   `json:"self_clock_in_cap,omitempty"`
	}
	oldRotateResult struct {
		Agent        domain.Agent `json:"agent"`
		Credential   string       `json:"credential"`
		MCPURL       string       `json:"mcp_url"`
		ClaudeMCPAdd string       `json:"claude_mcp_add"`
	}
	oldPushInput struct {
		Queue          string          `json:"queue"`
		Title          string          `json:"title"`
		Payload        json.RawMessage `json:"payload,omitempty"`
		Kind           string          `json:"kind,omitempty"`
		Source         string          `json:"source,omitempty"`
		IdempotencyKey string          `json:"idempotency_key,omitempty"`
		MaxAttempts    int             `json:"max_attempts,omitempty"`
	}
	oldTodoFilter struct {
		Queue string
		State string
		Limit int
	}
	oldAuditFilter struct {
		AgentRef string
		AfterSeq int64
		Limit    int
	}
	oldPresenceInput struct {
		Presence string     `json:"presence"`
		Until    *time.Time `json:"until"`
	}
	OldPresenceView struct {
		Presence string     `json:"presence"`
		Source   string     `json:"source"`
		Until    *time.Time `json:"until"`
		Shift    *string    `json:"shift"`
		Pending  int        `json:"pending"`
	}
	oldAgentPresence struct {
		OldPresenceView
		Agent     string        `json:"agent"`
		Held      []oldHeldTodo `json:"held"`
		HeldUntil *time.Time    `json:"held_until"`
	}
	oldHeldTodo struct {
		ID        string    `json:"id"`
		Queue     string    `json:"queue"`
		CreatedAt time.Time `json:"created_at"`
	}
	oldAgentRuntimeStatus struct {
		AgentID               string              `json:"agent_id"`
		Agent                 string              `json:"agent"`
		State                 string              `json:"state"`
		LastHeartbeatAt       *time.Time          `json:"last_heartbeat_at"`
		BillingMode           string              `json:"billing_mode,omitempty"`
		ToolClass             string              `json:"tool_class,omitempty"`
		ReportedBillingMode   *string             `json:"reported_billing_mode"`
		ReportedToolClass     *string             `json:"reported_tool_class"`
		BillingModesSupported []string            `json:"billing_modes_supported,omitempty"`
		BillingEvidence       *oldBillingEvidence `json:"billing_evidence"`
		Warnings              []string            `json:"warnings"`
		Runtime               *oldRuntimeInfo     `json:"runtime"`
		Adapter               *oldAdapterInfo     `json:"adapter"`
		ProjectReadiness      []oldReadiness      `json:"project_readiness"`
		Presence              oldAgentPresence    `json:"presence"`
	}
	oldBillingEvidence struct {
		KeyType string `json:"key_type"`
		Method  string `json:"method"`
	}
	oldRuntimeInfo struct {
		Name           string  `json:"name,omitempty"`
		RuntimeVersion *string `json:"runtime_version,omitempty"`
	}
	oldAdapterInfo struct {
		Name    string  `json:"name"`
		Version *string `json:"version,omitempty"`
	}
	oldReadiness struct {
		Queue  string `json:"queue"`
		Ready  bool   `json:"ready"`
		Reason string `json:"reason,omitempty"`
	}
	oldHookInput struct {
		Kind          string             `json:"kind"`
		Agent         string             `json:"agent"`
		Queue         string             `json:"queue"`
		Filter        *domain.HookFilter `json:"filter,omitempty"`
		TitleTemplate string             `json:"title_template,omitempty"`
		KindLabel     string             `json:"kind_label,omitempty"`
	}
	oldHookView struct {
		domain.Hook
		URL            string                `json:"url"`
		AgentHandle    string                `json:"agent_handle"`
		LastDeliveries []domain.HookDelivery `json:"last_deliveries,omitempty"`
	}
	oldHookSecretResult struct {
		Hook   oldHookView `json:"hook"`
		URL    string      `json:"url"`
		Secret string      `json:"secret"`
	}
	oldPersonInput struct {
		Name string `json:"name"`
		Role string `json:"role"`
	}
	oldPersonUpdate struct {
		Name   *string `json:"name,omitempty"`
		Role   *string `json:"role,omitempty"`
		Active *bool   `json:"active,omitempty"`
	}
	oldTokenInput struct {
		Name      string     `json:"name"`
		ExpiresAt *time.Time `json:"expires_at,omitempty"`
	}
	oldMintedToken struct {
		domain.PersonToken
		Token string `json:"token"`
	}
	oldPersonCreated struct {
		Person domain.Person  `json:"person"`
		Token  oldMintedToken `json:"token"`
	}
)

// TestJSONShapesUnchanged marshals each wire type and its old definition,
// once empty (omitempty and null members) and once with every field set
// (field names, nesting, embedded members), and wants the same bytes.
func TestJSONShapesUnchanged(t *testing.T) {
	for _, pair := range []struct{ now, old any }{
		{wire.VendInput{}, oldVendInput{}},
		{wire.HandoffInput{}, oldHandoffInput{}},
		{wire.VendResult{}, oldVendResult{}},
		{wire.UpdateInput{}, oldUpdateInput{}},
		{wire.RotateResult{}, oldRotateResult{}},
		{wire.PushInput{}, oldPushInput{}},
		{wire.TodoFilter{}, oldTodoFilter{}},
		{wire.AuditFilter{}, oldAuditFilter{}},
		{wire.PresenceInput{}, oldPresenceInput{}},
		{wire.PresenceView{}, OldPresenceView{}},
		{wire.AgentPresence{}, oldAgentPresence{}},
		{wire.HeldTodo{}, oldHeldTodo{}},
		{wire.AgentRuntimeStatus{}, oldAgentRuntimeStatus{}},
		{wire.BillingEvidence{}, oldBillingEvidence{}},
		{wire.RuntimeInfo{}, oldRuntimeInfo{}},
		{wire.AdapterInfo{}, oldAdapterInfo{}},
		{wire.Readiness{}, oldReadiness{}},
		{wire.HookInput{}, oldHookInput{}},
		{wire.HookView{}, oldHookView{}},
		{wire.HookSecretResult{}, oldHookSecretResult{}},
		{wire.PersonInput{}, oldPersonInput{}},
		{wire.PersonUpdate{}, oldPersonUpdate{}},
		{wire.PersonCreated{}, oldPersonCreated{}},
		{wire.TokenInput{}, oldTokenInput{}},
		{wire.MintedToken{}, oldMintedToken{}},
	} {
		name := reflect.TypeOf(pair.now).Name()
		t.Run(name, func(t *testing.T) {
			same(t, "empty", pair.now, pair.old)
			now, old := reflect.New(reflect.TypeOf(pair.now)), reflect.New(reflect.TypeOf(pair.old))
			fill(now.Elem(), 0)
			fill(old.Elem(), 0)
			same(t, "filled", now.Interface(), old.Interface())
		})
	}
}

func same(t *testing.T, what string, now, old any) {
	t.Helper()
	a, err := json.Marshal(now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("%s: JSON changed\nnow: %s\nwas: %s", what, a, b)
	}
	if what == "filled" && len(a) < 10 && reflect.TypeOf(now).Elem().NumField() > 1 {
		t.Fatalf("filled value marshals to %s: the filler set nothing", a)
	}
}

var stamp = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

// fill sets every exported field reachable from v to a value derived from
// its depth, the same for both definitions.
func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	switch {
	case v.Type() == reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(stamp.Add(time.Duration(depth) * time.Minute)))
		return
	case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
		v.SetBytes([]byte(`{"n":1}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(3 + depth))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(3 + depth))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}
