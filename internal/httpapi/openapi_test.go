package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	apidoc "github.com/rollcall/rollcall/api"
	"github.com/rollcall/rollcall/internal/httpapi"
)

// spec is api/openapi.yaml loaded for tests: the operations it documents and
// compiled JSON Schemas (2020-12, formats asserted) for its responses.
type spec struct {
	doc  map[string]any
	ops  map[string]map[string]any // "METHOD /path" → operation object
	mux  *http.ServeMux            // documented paths, to find a request's pattern
	comp *jsonschema.Compiler

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema
}

const specURL = "mem:///openapi.json"

var (
	specOnce sync.Once
	theSpec  *spec
	specErr  error
)

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadSpec(t testing.TB) *spec {
	t.Helper()
	specOnce.Do(func() { theSpec, specErr = parseSpec(apidoc.OpenAPI) })
	if specErr != nil {
		t.Fatalf("api/openapi.yaml: %v", specErr)
	}
	return theSpec
}

func parseSpec(src []byte) (*spec, error) {
	var y any
	if err := yaml.Unmarshal(src, &y); err != nil {
		return nil, err
	}
	// Round-trip through JSON so the schema library sees JSON values.
	j, err := json.Marshal(y)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, err
	}
	s := &spec{doc: doc.(map[string]any), ops: map[string]map[string]any{}, mux: http.NewServeMux(), schemas: map[string]*jsonschema.Schema{}}
	if v, _ := s.doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		return nil, fmt.Errorf("openapi = %q, want 3.1.x", v)
	}
	paths, _ := s.doc["paths"].(map[string]any)
	for p, item := range paths {
		for m, op := range item.(map[string]any) {
			if !slices.Contains(httpMethods, m) {
				continue
			}
			key := strings.ToUpper(m) + " " + p
			s.ops[key] = op.(map[string]any)
			s.mux.Handle(key, http.NotFoundHandler())
		}
	}
	s.comp = jsonschema.NewCompiler()
	s.comp.DefaultDraft(jsonschema.Draft2020)
	s.comp.AssertFormat()
	if err := s.comp.AddResource(specURL, doc); err != nil {
		return nil, err
	}
	return s, nil
}

// resolve follows a local "$ref" of a non-schema object (a response or a
// parameter) and returns the object and its JSON pointer.
func (s *spec) resolve(obj map[string]any, ptr string) (map[string]any, string) {
	for {
		ref, ok := obj["$ref"].(string)
		if !ok {
			return obj, ptr
		}
		ptr = strings.TrimPrefix(ref, "#")
		var cur any = s.doc
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			cur = cur.(map[string]any)[tok]
		}
		obj = cur.(map[string]any)
	}
}

func escapeTok(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (s *spec) schema(ptr string) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.schemas[ptr]; ok {
		return sch, nil
	}
	sch, err := s.comp.Compile(specURL + "#" + ptr)
	if err != nil {
		return nil, err
	}
	s.schemas[ptr] = sch
	return sch, nil
}

// checkResponse validates a response against the document: the status must
// be documented for the operation, the media type must be the documented
// one, and a JSON body must match the documented schema. Responses of
// unrouted requests (the mux's 404/405) are not operations and are skipped.
func (s *spec) checkResponse(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	_, pattern := s.mux.Handler(req)
	if pattern == "" {
		return
	}
	opPtr := "/paths/" + escapeTok(strings.SplitN(pattern, " ", 2)[1]) + "/" + strings.ToLower(req.Method)
	op := s.ops[pattern]
	responses, _ := op["responses"].(map[string]any)
	code := strconv.Itoa(status)
	raw, ok := responses[code].(map[string]any)
	if !ok {
		t.Errorf("%s %s answered %d, which api/openapi.yaml does not document for %s", req.Method, req.URL, status, pattern)
		return
	}
	resp, respPtr := s.resolve(raw, opPtr+"/responses/"+code)
	content, _ := resp["content"].(map[string]any)
	mt, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	media, ok := content[mt].(map[string]any)
	if !ok {
		t.Errorf("%s %s %d: Content-Type %q is not documented (documented: %v)", req.Method, req.URL, status, mt, keys(content))
		return
	}
	if !strings.HasSuffix(mt, "json") {
		return
	}
	if _, ok := media["schema"]; !ok {
		t.Errorf("%s %s %d: no schema documented", req.Method, req.URL, status)
		return
	}
	sch, err := s.schema(respPtr + "/content/" + escapeTok(mt) + "/schema")
	if err != nil {
		t.Fatalf("compiling the schema of %s %d: %v", pattern, status, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s %s %d: body is not JSON: %v\n%s", req.Method, req.URL, status, err, body)
		return
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s %s %d: body does not match api/openapi.yaml:\n%v\nbody: %s", req.Method, req.URL, status, err, body)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var pathParamRE = regexp.MustCompile(`\{([^}]+)\}`)

// TestOpenAPIMatchesRoutes fails when the route table (what New registers)
// and api/openapi.yaml disagree, in either direction, on methods, paths,
// operationIds, path parameters or security.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := loadSpec(t)
	routes := map[string]httpapi.Route{}
	for _, r := range httpapi.Routes() {
		key := r.Method + " " + r.Path
		if _, dup := routes[key]; dup {
			t.Errorf("route %s registered twice", key)
		}
		routes[key] = r
	}
	for key, r := range routes {
		op, ok := s.ops[key]
		if !ok {
			t.Errorf("route %s (%s) is served but not documented in api/openapi.yaml", key, r.OperationID)
			continue
		}
		if id, _ := op["operationId"].(string); id != r.OperationID {
			t.Errorf("%s: operationId %q in the document, %q in the route table", key, id, r.OperationID)
		}
		sec, hasSec := op["security"].([]any)
		public := hasSec && len(sec) == 0
		if public == r.Auth {
			t.Errorf("%s: route Auth=%v but the document says public=%v", key, r.Auth, public)
		}
		responses, _ := op["responses"].(map[string]any)
		if r.Auth {
			for _, c := range []string{"401", "403", "500"} {
				if _, ok := responses[c]; !ok {
					t.Errorf("%s: authenticated operation does not document %s", key, c)
				}
			}
		}
		if _, hasBody := op["requestBody"]; hasBody {
			for _, c := range []string{"400", "413", "415"} {
				if _, ok := responses[c]; !ok {
					t.Errorf("%s: operation with a body does not document %s", key, c)
				}
			}
			rb, _ := s.resolve(op["requestBody"].(map[string]any), "")
			schema := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
			if ref, ok := schema["$ref"].(string); ok {
				comp := s.doc["components"].(map[string]any)["schemas"].(map[string]any)[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
				if comp["additionalProperties"] != false {
					t.Errorf("%s: request body schema %s must say additionalProperties: false", key, ref)
				}
			}
		}
		// Path parameters: every {name} is documented as a required path
		// parameter, and no other path parameter is documented.
		want := map[string]bool{}
		for _, m := range pathParamRE.FindAllStringSubmatch(r.Path, -1) {
			want[m[1]] = true
		}
		got := map[string]bool{}
		var query []string
		_, path, _ := strings.Cut(key, " ")
		var params []any
		if item, ok := s.doc["paths"].(map[string]any)[path].(map[string]any); ok {
			p, _ := item["parameters"].([]any)
			params = append(params, p...)
		}
		p, _ := op["parameters"].([]any)
		params = append(params, p...)
		for _, pv := range params {
			pm, _ := s.resolve(pv.(map[string]any), "")
			switch pm["in"] {
			case "path":
				got[pm["name"].(string)] = true
				if pm["required"] != true {
					t.Errorf("%s: path parameter %v is not required", key, pm["name"])
				}
			case "query":
				query = append(query, pm["name"].(string))
			}
		}
		// Query parameters: the document lists exactly the route's Query
		// (which wrap enforces), and every route can answer 400 for one it
		// does not take.
		if !slices.Equal(query, r.Query) {
			t.Errorf("%s: query parameters %v in the document, %v in the route table", key, query, r.Query)
		}
		if _, ok := responses["400"]; !ok {
			t.Errorf("%s: does not document 400 (every route refuses unknown query parameters)", key)
		}
		for n := range want {
			if !got[n] {
				t.Errorf("%s: path parameter {%s} is not documented", key, n)
			}
		}
		for n := range got {
			if !want[n] {
				t.Errorf("%s: documents path parameter %s that the path does not have", key, n)
			}
		}
	}
	ids := map[string]string{}
	for key, op := range s.ops {
		if _, ok := routes[key]; !ok {
			t.Errorf("api/openapi.yaml documents %s, which the server does not serve", key)
		}
		id, _ := op["operationId"].(string)
		if id == "" {
			t.Errorf("%s has no operationId", key)
		}
		if other, dup := ids[id]; dup {
			t.Errorf("operationId %q used by %s and %s", id, other, key)
		}
		ids[id] = key
	}
}

// TestOpenAPISchemasCompile compiles every component schema (all $refs
// resolve, every schema is valid JSON Schema 2020-12).
func TestOpenAPISchemasCompile(t *testing.T) {
	s := loadSpec(t)
	for name := range s.doc["components"].(map[string]any)["schemas"].(map[string]any) {
		if _, err := s.schema("/components/schemas/" + escapeTok(name)); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	}
}

// TestMuxServesEveryDocumentedOperation sends every documented operation to
// the real handler without credentials: each must reach its route (401 for
// operator routes, 200 for public ones), never the mux's 404 or 405.
func TestMuxServesEveryDocumentedOperation(t *testing.T) {
	e := newEnv(t)
	s := loadSpec(t)
	for key, op := range s.ops {
		method, path, _ := strings.Cut(key, " ")
		path = pathParamRE.ReplaceAllString(path, "x")
		var body any
		if _, ok := op["requestBody"]; ok {
			body = map[string]any{}
		}
		r := e.do(t, method, path, "", body)
		sec, hasSec := op["security"].([]any)
		want := http.StatusUnauthorized
		if hasSec && len(sec) == 0 {
			want = http.StatusOK
		}
		// A public route on a path parameter ("x") may answer its own 404
		// problem (an unknown hook), which is not the mux's "no route".
		ownNotFound := want == http.StatusOK && r.status == http.StatusNotFound && strings.Contains(key, "{") && !bytes.Contains(r.body, []byte("no route"))
		if r.status != want && !ownNotFound {
			t.Errorf("%s %s (%s) = %d, want %d: %s", method, path, key, r.status, want, r.body)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "GET", "/v1/openapi.yaml", "", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/yaml" || !bytes.Equal(r.body, apidoc.OpenAPI) {
		t.Fatalf("GET /v1/openapi.yaml = %d %q, %d bytes; want the embedded document", r.status, r.header.Get("Content-Type"), len(r.body))
	}
}

// TestOpenAPIDocumentIsValid validates api/openapi.yaml against the
// official OpenAPI 3.1 schema (testdata/oas-3.1-schema-2022-10-07.json, from
// spec.openapis.org, as shipped by openapi-spec-validator).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	f, err := os.Open("testdata/oas-3.1-schema-2022-10-07.json")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	meta, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	const url = "https://spec.openapis.org/oas/3.1/schema/2022-10-07"
	if err := c.AddResource(url, meta); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	s := loadSpec(t)
	if err := sch.Validate(s.doc); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI 3.1 document:\n%v", err)
	}
}
