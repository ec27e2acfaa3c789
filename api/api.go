// Package api embeds Rollcall's OpenAPI 3.1 document (openapi.yaml), the
// description of the REST API under /v1 (design: Problem documents,
// Strict JSON). The server serves it at GET /v1/openapi.yaml; a test in
// internal/httpapi fails when the document and the routes the server
// registers disagree.
package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document, YAML, as committed in
// api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
