package strictjson

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// NameError is CheckNames' refusal: the member at Pointer repeats, exactly
// or up to case folding, a name given earlier in the same object.
type NameError struct {
	Name    string // the second spelling
	Pointer string // RFC 6901 pointer of the second member
}

func (e *NameError) Error() string {
	return fmt.Sprintf("member %q at %s repeats a member name of its object (names are compared without regard to letter case)", e.Name, e.Pointer)
}

// CheckNames refuses a body in which one object gives a member name twice,
// also when the two spellings differ only in letter case (ASCII or Unicode
// simple case folding, as strings.EqualFold): the body is meant for a
// decoder that takes the last duplicate and matches names
// case-insensitively (encoding/json v1, behind the OAuth registration
// endpoint, the hook deliveries and the MCP JSON-RPC envelope), so such a
// body reads one way here and another there (design: One
// reading of a body). The error is a *NameError. A body that is not valid
// JSON is left (nil) to the decoder behind, which reports it as it does
// today. The values of members at the pointers in skip are not walked:
// they are judged by a strict decoder of their own.
func CheckNames(body []byte, skip ...string) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	var stack []frame
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		// A value's pointer inside the innermost container.
		var ptr string
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			switch {
			case top.object && tok.Kind() == '"' && dec.StackDepth() == n && isName(dec):
				name := tok.String()
				ptr = Member(top.ptr, name)
				if top.repeats(name) {
					return &NameError{Name: name, Pointer: ptr}
				}
				if len(skip) > 0 && contains(skip, ptr) {
					if dec.SkipValue() != nil {
						return nil
					}
				}
				continue
			case tok.Kind() == '}' || tok.Kind() == ']':
				stack = stack[:n-1]
				if len(stack) == 0 {
					return nil
				}
				continue
			case top.object:
				ptr = Member(top.ptr, top.last)
			default:
				ptr = fmt.Sprintf("%s/%d", top.ptr, top.next)
				top.next++
			}
		}
		switch tok.Kind() {
		case '{':
			stack = append(stack, frame{ptr: ptr, object: true})
		case '[':
			stack = append(stack, frame{ptr: ptr})
		default:
			if len(stack) == 0 {
				return nil
			}
		}
	}
}

// One frame per open object or array: the pointer of the container
// and, for an object, the names seen so far.
type frame struct {
	ptr    string
	object bool
	names  []string            // the names so far, while few
	last   string              // the last name read
	folded map[string]struct{} // fold(name) of every name, once names is long
	next   int                 // the index of the next element, for an array
}

// fewNames is how many names of one object are compared one by one before
// they go into a map: a body of many members must not cost a comparison
// of every pair (an unauthenticated registration body is up to its limit).
const fewNames = 16

// repeats records name in f and reports whether the object gave it
// before, up to case folding.
func (f *frame) repeats(name string) bool {
	f.last = name
	if f.folded == nil {
		for _, seen := range f.names {
			if strings.EqualFold(seen, name) {
				return true
			}
		}
		if f.names = append(f.names, name); len(f.names) <= fewNames {
			return false
		}
		f.folded = make(map[string]struct{}, 2*fewNames)
		for _, n := range f.names {
			f.folded[fold(n)] = struct{}{}
		}
		f.names = nil
		return false
	}
	k := fold(name)
	if _, ok := f.folded[k]; ok {
		return true
	}
	f.folded[k] = struct{}{}
	return false
}

// fold is a key equal for names that strings.EqualFold finds equal (simple
// case folding: upper, then lower, so that ſ and s, K and k meet).
func fold(name string) string { return strings.ToLower(strings.ToUpper(name)) }

// isName reports whether the string token just read by dec was an object
// member's name (not its value): inside an object, the length of the
// stack entry is odd after a name.
func isName(dec *jsontext.Decoder) bool {
	_, length := dec.StackIndex(dec.StackDepth())
	return length%2 == 1
}
