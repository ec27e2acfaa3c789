package client_test

import (
	"os"
	"reflect"
	"sort"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/rollcall/rollcall/client"
)

// covered maps every operationId of api/openapi.yaml that the Go client
// serves to the *client.Client method that calls it.
var covered = map[string]string{
	"getReady":         "Ready",
	"vendAgent":        "VendAgent",
	"listAgents":       "ListAgents", // and ListAgentsOf (the owner filter)
	"getAgent":         "GetAgent",
	"updateAgent":      "UpdateAgent",
	"revokeAgent":      "RevokeAgent",
	"rotateCredential": "RotateCredential",
	"pushTodo":         "PushTodo",
	"listAgentTodos":   "ListTodos",
	"getTodo":          "GetTodo",
	"getPresence":      "GetPresence",
	"setPresence":      "SetPresence",
	"clearPresence":    "ClearPresence",
	"setShift":         "SetShift",
	"getAgentStatus":   "AgentStatus",
	"listAudit":        "ListAudit",
	"verifyAudit":      "VerifyAudit",
	"createPerson":     "CreatePerson",
	"listPersons":      "ListPersons",
	"getPerson":        "GetPerson",
	"updatePerson":     "UpdatePerson",
	"createToken":      "CreateToken",
	"listTokens":       "ListTokens",
	"revokeToken":      "RevokeToken",
	"createHook":       "CreateHook",
	"listHooks":        "ListHooks",
	"getHook":          "GetHook",
	"deleteHook":       "DeleteHook",
	"rotateHookSecret": "RotateHookSecret",
	"createPool":       "CreatePool",
	"listPools":        "ListPools",
	"getPool":          "GetPool",
	"deletePool":       "DeletePool",
	"updatePool":       "UpdatePool",
	"pushPoolTodo":     "PushPoolTodo",
	"listPoolTodos":    "ListPoolTodos",
	"grantPool":        "GrantPool",
	"listPoolGrants":   "ListPoolGrants",
	"revokePoolGrant":  "RevokePoolGrant",
}

// uncovered lists the operations the operator client intentionally does not
// call, with the reason.
var uncovered = map[string]string{
	"getHealth":     "liveness probe for load balancers; Ready covers the operator's need",
	"getOpenAPI":    "serves this document itself; clients are generated from the file",
	"sendHeartbeat": "called by agents with their own credential (MCP/gateway side), not by operators",
	"streamEvents":  "server-sent event stream; consumed by dashboards and internal/testkit, not a request/answer call",
	"deliverHook":   "webhook ingress called by the external sender with the hook secret, not by operators",
}

// TestEveryOperationHasAClientMethod fails when api/openapi.yaml gains an
// operation that neither has a client method nor is listed as uncovered, and
// when either list names an operation or method that does not exist.
func TestEveryOperationHasAClientMethod(t *testing.T) {
	data, err := os.ReadFile("../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, item := range doc.Paths {
		for _, node := range item {
			var op struct {
				OperationID string `yaml:"operationId"`
			}
			if node.Kind != yaml.MappingNode { // e.g. path-level parameters
				continue
			}
			if err := node.Decode(&op); err != nil {
				t.Fatal(err)
			}
			if op.OperationID != "" {
				ops[op.OperationID] = true
			}
		}
	}
	if len(ops) == 0 {
		t.Fatal("no operationId found in api/openapi.yaml")
	}
	typ := reflect.TypeOf(&client.Client{})
	var missing []string
	for id := range ops {
		m, ok := covered[id]
		if _, skip := uncovered[id]; skip {
			if ok {
				t.Errorf("operation %s is both covered (%s) and uncovered", id, m)
			}
			continue
		}
		if !ok {
			missing = append(missing, id)
			continue
		}
		if _, ok := typ.MethodByName(m); !ok {
			t.Errorf("operation %s maps to client.%s, which does not exist", id, m)
		}
	}
	sort.Strings(missing)
	for _, id := range missing {
		t.Errorf("operation %s has no client method: add one and list it in covered, or list it in uncovered with the reason", id)
	}
	for id := range covered {
		if !ops[id] {
			t.Errorf("covered lists %s, which api/openapi.yaml no longer has", id)
		}
	}
	for id := range uncovered {
		if !ops[id] {
			t.Errorf("uncovered lists %s, which api/openapi.yaml no longer has", id)
		}
	}
}
