package httpapi

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/strictjson"
)

// MaxBodyBytes is the largest request body the API reads: 1 MiB. A larger
// body answers 413 with code invalid_argument.
const MaxBodyBytes = 1 << 20

// statusError is a domain error that needs an HTTP status other than the one
// its code maps to (413, 415, 503).
type statusError struct {
	status int
	err    *domain.Error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// decodeJSON is the one request body decoder of the REST API. It requires
// Content-Type application/json (415 otherwise), reads at most MaxBodyBytes
// (413 beyond), and then decodes strictly (see decodeStrict). Every failure
// is returned before any use case runs, so bad input changes nothing.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return &statusError{http.StatusUnsupportedMediaType,
			domain.Errorf(domain.CodeInvalidArgument, "Content-Type must be application/json, got %q", ct)}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return &statusError{http.StatusUnsupportedMediaType,
			domain.Errorf(domain.CodeInvalidArgument, "the request body must be UTF-8, got charset %q", cs)}
	}
	tooLarge := &statusError{http.StatusRequestEntityTooLarge,
		domain.Errorf(domain.CodeInvalidArgument, "the request body exceeds the limit of %d bytes (1 MiB)", MaxBodyBytes)}
	if r.ContentLength > MaxBodyBytes {
		return tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge
		}
		return domain.Errorf(domain.CodeInvalidArgument, "reading the request body failed: %v", err)
	}
	if de := decodeStrict(body, dst); de != nil {
		if strictjson.WholeDocument(de) {
			return &wholeBodyError{de}
		}
		return de
	}
	return nil
}

// decodeStrict decodes one JSON object from body into dst (a pointer to a
// struct) with the strict-JSON layer under the REST contract
// (strictjson.REST), which refuses anything the struct does not describe:
//
//   - empty body, invalid UTF-8 or malformed JSON → invalid_argument whose
//     detail names the byte offset;
//   - data after the value → invalid_argument (trailing data);
//   - a top level that is not an object (null included) → invalid_argument
//     "the body must be a JSON object" about the whole document (pointer "",
//     see wholeBodyError);
//   - a member the struct has no json tag for, at any depth →
//     unknown_member with the member's RFC 6901 pointer;
//   - a member name given twice in one object → invalid_argument with its
//     pointer;
//   - a value of the wrong JSON type (or an integer out of range) →
//     invalid_argument with its pointer;
//   - a value that a field type judges itself (json.Unmarshaler or
//     encoding.TextUnmarshaler, such as time.Time) and refuses →
//     invalid_argument with its pointer and a detail that says what is
//     wanted (never the Go error).
//
// json.RawMessage and interface fields are free-form and not checked
// against a shape. A JSON null member counts as absent. Member names match
// exactly.
func decodeStrict(body []byte, dst any) *domain.Error {
	return strictjson.Decode(body, dst, strictjson.REST)
}

// wholeBodyError is a body error about the whole document: its problem
// carries the RFC 6901 pointer "" explicitly.
type wholeBodyError struct{ err *domain.Error }

func (e *wholeBodyError) Error() string { return e.err.Error() }
func (e *wholeBodyError) Unwrap() error { return e.err }

// readLimited reads a request body of at most max bytes. A larger one —
// said so by Content-Length before anything is read, or found while
// reading — answers 413 with tooLarge; another read error is readFailed's.
func readLimited(w http.ResponseWriter, r *http.Request, max int64, tooLarge *domain.Error, readFailed func(error) error) ([]byte, error) {
	if r.ContentLength > max {
		return nil, &statusError{http.StatusRequestEntityTooLarge, tooLarge}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &statusError{http.StatusRequestEntityTooLarge, tooLarge}
		}
		return nil, readFailed(err)
	}
	return body, nil
}
