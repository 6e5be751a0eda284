package guest

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Value is a JSON value inside a cluster object (Object.Get), read through
// its methods. Its zero value is a missing value: Exists is false, every
// accessor answers false or empty, and Get, Index and Keys on it give
// missing values again, so a path can be read without checking each step:
//
//	cpu, ok := o.Get("spec", "max").Get("cpu").Quantity(guest.ResourceCPU)
//
// A Value reads the parse of its object's JSON, made once by a small
// scanner of its own (no reflection, no encoding/json: it works under
// TinyGo). Reading a member walks the members of its object and reading an
// array element the elements before it, without parsing anything again.
// A Value is read-only and may be kept as long as its Object.
type Value struct {
	doc *document
	i   int32 // the value's node in doc.nodes
}

// document is the parse of one JSON text: one node per value, in the
// order they appear, each container followed by its members' nodes.
type document struct {
	data  []byte
	nodes []jnode
}

// jnode is one parsed value.
type jnode struct {
	// start and end delimit the value's text; for a string, its contents
	// without the quotes.
	start, end int32
	// key0 and key1 delimit an object member's name, without the quotes.
	key0, key1 int32
	// next is the index of the node after this value and its members: its
	// next sibling, if any.
	next int32
	// n is a container's number of members or elements.
	n     int32
	typ   byte // one of the jXxx constants
	flags byte // escaped, keyEscaped
}

// The types of parsed values.
const (
	jObject byte = '{'
	jArray  byte = '['
	jString byte = '"'
	jNumber byte = '0'
	jTrue   byte = 't'
	jFalse  byte = 'f'
	jNull   byte = 'n'
)

// Flags of a jnode: its string or member name holds escapes or bytes that
// are not UTF-8, so it must be decoded before use.
const (
	escaped    byte = 1
	keyEscaped byte = 2
)

// maxDocument bounds the JSON text the scanner parses: offsets are
// int32s. The host's message limit is far below it.
const maxDocument = 1 << 30

// parseDocument parses data. A malformed text gives a document with no
// nodes, whose root is missing.
func parseDocument(data []byte) *document {
	d := &document{data: data}
	if len(data) < maxDocument {
		if nodes, ok := scan(data); ok {
			d.nodes = nodes
		}
	}
	return d
}

func (d *document) root() Value {
	if len(d.nodes) == 0 {
		return Value{}
	}
	return Value{doc: d}
}

// ParseValue parses a JSON text into a Value, for JSON a policy holds
// outside of an object (an annotation's value, say). A malformed text
// gives a missing Value.
func ParseValue(data []byte) Value { return parseDocument(data).root() }

// scan parses a JSON text (RFC 8259) into nodes, without recursion: a
// hostile depth costs memory, never stack. It reports false for anything
// malformed, trailing data included.
func scan(data []byte) ([]jnode, bool) {
	nodes := make([]jnode, 0, 16)
	var open []int32 // the containers not yet closed, innermost last
	key0, key1, keyFlags := int32(-1), int32(-1), byte(0)
	p := 0
	for {
		// A value at p.
		p = skipSpace(data, p)
		if p >= len(data) {
			return nil, false
		}
		i := int32(len(nodes))
		nd := jnode{start: int32(p), key0: key0, key1: key1, flags: keyFlags}
		if len(open) > 0 {
			nodes[open[len(open)-1]].n++
		}
		closed := true
		switch c := data[p]; {
		case c == '{' || c == '[':
			nd.typ = c
			closed = false
			p++
		case c == '"':
			end, esc, ok := scanString(data, p)
			if !ok {
				return nil, false
			}
			nd.typ, nd.start, nd.end = jString, int32(p+1), int32(end)
			if esc {
				nd.flags |= escaped
			}
			p = end + 1
		case c == '-' || c >= '0' && c <= '9':
			end, ok := scanNumber(data, p)
			if !ok {
				return nil, false
			}
			nd.typ, nd.end = jNumber, int32(end)
			p = end
		case c == 't' || c == 'f' || c == 'n':
			lit := "null"
			if c == 't' {
				lit = "true"
			} else if c == 'f' {
				lit = "false"
			}
			if len(data)-p < len(lit) || string(data[p:p+len(lit)]) != lit {
				return nil, false
			}
			nd.typ, nd.end = c, int32(p+len(lit))
			p += len(lit)
		default:
			return nil, false
		}
		nd.next = i + 1
		nodes = append(nodes, nd)
		key0, key1, keyFlags = -1, -1, 0
		if !closed {
			open = append(open, i)
			// An empty container closes at once; otherwise its first
			// member follows.
			p = skipSpace(data, p)
			if p < len(data) && data[p] == closer(nd.typ) {
				nodes[i].end, nodes[i].next = int32(p+1), int32(len(nodes))
				open = open[:len(open)-1]
				p++
			} else {
				if nd.typ == jObject {
					var ok bool
					if p, ok = scanKey(data, p, &key0, &key1, &keyFlags); !ok {
						return nil, false
					}
				}
				continue
			}
		}
		// After a value: close containers, or a separator and the next
		// member.
		for {
			if len(open) == 0 {
				if skipSpace(data, p) != len(data) {
					return nil, false
				}
				return nodes, true
			}
			p = skipSpace(data, p)
			if p >= len(data) {
				return nil, false
			}
			top := open[len(open)-1]
			if data[p] == closer(nodes[top].typ) {
				nodes[top].end, nodes[top].next = int32(p+1), int32(len(nodes))
				open = open[:len(open)-1]
				p++
				continue
			}
			if data[p] != ',' {
				return nil, false
			}
			p++
			if nodes[top].typ == jObject {
				var ok bool
				if p, ok = scanKey(data, p, &key0, &key1, &keyFlags); !ok {
					return nil, false
				}
			}
			break
		}
	}
}

func closer(typ byte) byte {
	if typ == jObject {
		return '}'
	}
	return ']'
}

func skipSpace(data []byte, p int) int {
	for p < len(data) {
		switch data[p] {
		case ' ', '\t', '\n', '\r':
			p++
		default:
			return p
		}
	}
	return p
}

// scanKey reads an object member's name and the colon after it, from p;
// it returns the position after the colon.
func scanKey(data []byte, p int, key0, key1 *int32, flags *byte) (int, bool) {
	p = skipSpace(data, p)
	if p >= len(data) || data[p] != '"' {
		return 0, false
	}
	end, esc, ok := scanString(data, p)
	if !ok {
		return 0, false
	}
	*key0, *key1, *flags = int32(p+1), int32(end), 0
	if esc {
		*flags = keyEscaped
	}
	p = skipSpace(data, end+1)
	if p >= len(data) || data[p] != ':' {
		return 0, false
	}
	return p + 1, true
}

// scanString reads the string whose opening quote is at p and returns the
// position of its closing quote and whether it must be decoded: it holds
// escapes, or bytes that are not UTF-8, which decoding turns into U+FFFD as
// encoding/json does. Control characters must be escaped.
func scanString(data []byte, p int) (end int, decode, ok bool) {
	esc, high := false, false
	for i := p + 1; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i, esc || high && !utf8.Valid(data[p+1:i]), true
		case c >= utf8.RuneSelf:
			high = true
		case c == '\\':
			esc = true
			i++
			if i >= len(data) {
				return 0, false, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(data)-i <= 4 || !isHex(data[i+1]) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) {
					return 0, false, false
				}
				i += 4
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		}
	}
	return 0, false, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber reads the number at p: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(data []byte, p int) (int, bool) {
	if p < len(data) && data[p] == '-' {
		p++
	}
	digits := func() bool {
		q := p
		for p < len(data) && data[p] >= '0' && data[p] <= '9' {
			p++
		}
		return p > q
	}
	if p < len(data) && data[p] == '0' {
		p++
	} else if !digits() {
		return 0, false
	}
	if p < len(data) && data[p] == '.' {
		p++
		if !digits() {
			return 0, false
		}
	}
	if p < len(data) && (data[p] == 'e' || data[p] == 'E') {
		p++
		if p < len(data) && (data[p] == '+' || data[p] == '-') {
			p++
		}
		if !digits() {
			return 0, false
		}
	}
	return p, true
}

// unescape decodes the contents of a JSON string: a \u escape of a lone
// surrogate, and bytes that are not UTF-8, become U+FFFD, as encoding/json
// decodes them.
func unescape(s []byte) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			if c < utf8.RuneSelf {
				b = append(b, c)
				i++
				continue
			}
			r, size := utf8.DecodeRune(s[i:])
			b = utf8.AppendRune(b, r)
			i += size
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if len(s)-i > 6 && s[i+1] == '\\' && s[i+2] == 'u' {
					r2 = hex4(s[i+3:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default: // " \ /
			b = append(b, s[i])
		}
		i++
	}
	return string(b)
}

func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func (v Value) node() *jnode { return &v.doc.nodes[v.i] }

// Exists reports whether the value is there: false for a missing member,
// an index out of range, or a path through something else than an object.
// A JSON null exists; IsNull tells it.
func (v Value) Exists() bool { return v.doc != nil }

// IsNull reports whether the value is JSON null.
func (v Value) IsNull() bool { return v.doc != nil && v.node().typ == jNull }

// IsObject reports whether the value is a JSON object.
func (v Value) IsObject() bool { return v.doc != nil && v.node().typ == jObject }

// IsArray reports whether the value is a JSON array.
func (v Value) IsArray() bool { return v.doc != nil && v.node().typ == jArray }

// String returns a string value, decoded; false for anything else.
func (v Value) String() (string, bool) {
	if v.doc == nil || v.node().typ != jString {
		return "", false
	}
	n := v.node()
	s := v.doc.data[n.start:n.end]
	if n.flags&escaped != 0 {
		return unescape(s), true
	}
	return string(s), true
}

// Bool returns a boolean value; false, false for anything else.
func (v Value) Bool() (bool, bool) {
	if v.doc == nil {
		return false, false
	}
	switch v.node().typ {
	case jTrue:
		return true, true
	case jFalse:
		return false, true
	}
	return false, false
}

// Int returns a number that is an integer within int64 (5, -3, 2.0, 1e3);
// false for anything else, strings holding digits included.
func (v Value) Int() (int64, bool) {
	if v.doc == nil || v.node().typ != jNumber {
		return 0, false
	}
	n := v.node()
	text := v.doc.data[n.start:n.end]
	if i, bad := parseInt(string(text)); !bad {
		return i, true
	}
	f, err := strconv.ParseFloat(string(text), 64)
	// 2^63 is the first float64 past the int64 range.
	if err != nil || f != f || f < -(1<<63) || f >= 1<<63 || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

// Float returns a number as a float64 (the nearest one); false for
// anything else and for a number beyond float64's range.
func (v Value) Float() (float64, bool) {
	if v.doc == nil || v.node().typ != jNumber {
		return 0, false
	}
	n := v.node()
	f, err := strconv.ParseFloat(string(v.doc.data[n.start:n.end]), 64)
	return f, err == nil
}

// Raw returns the value's JSON text, for a decoder of the policy's choice
// (ParseSettings reads it into a struct in a native build); nil when the
// value is missing. It is read-only.
func (v Value) Raw() []byte {
	if v.doc == nil {
		return nil
	}
	n := v.node()
	if n.typ == jString {
		return v.doc.data[n.start-1 : n.end+1]
	}
	return v.doc.data[n.start:n.end]
}

// Get returns the member at path: each element names a member of the
// object before it. Get() is v itself. When a name occurs twice in an
// object, the last one counts, as with encoding/json.
func (v Value) Get(path ...string) Value {
	for _, name := range path {
		v = v.member(name)
	}
	return v
}

func (v Value) member(name string) Value {
	if v.doc == nil || v.node().typ != jObject {
		return Value{}
	}
	nodes, data := v.doc.nodes, v.doc.data
	found := Value{}
	j := v.i + 1
	for range v.node().n {
		m := &nodes[j]
		key := data[m.key0:m.key1]
		if m.flags&keyEscaped == 0 {
			if string(key) == name {
				found = Value{doc: v.doc, i: j}
			}
		} else if unescape(key) == name {
			found = Value{doc: v.doc, i: j}
		}
		j = m.next
	}
	return found
}

// Index returns element i of an array; a missing Value when v is no array
// or i is out of range. It walks the elements before i: use Each to read
// them all.
func (v Value) Index(i int) Value {
	if v.doc == nil || v.node().typ != jArray || i < 0 || i >= int(v.node().n) {
		return Value{}
	}
	j := v.i + 1
	for ; i > 0; i-- {
		j = v.doc.nodes[j].next
	}
	return Value{doc: v.doc, i: j}
}

// Len returns the number of members of an object or elements of an
// array; 0 for anything else.
func (v Value) Len() int {
	if v.doc == nil {
		return 0
	}
	switch n := v.node(); n.typ {
	case jObject, jArray:
		return int(n.n)
	}
	return 0
}

// Keys returns the member names of an object, in the order of the JSON
// text; nil for anything else.
func (v Value) Keys() []string {
	if v.doc == nil || v.node().typ != jObject {
		return nil
	}
	keys := make([]string, 0, v.node().n)
	v.Each(func(key string, _ Value) bool {
		keys = append(keys, key)
		return true
	})
	return keys
}

// Each calls fn for every member of an object (with its name) or element
// of an array (with an empty name), in the order of the JSON text, until
// fn returns false. It does nothing for anything else.
func (v Value) Each(fn func(key string, v Value) bool) {
	if v.doc == nil {
		return
	}
	typ := v.node().typ
	if typ != jObject && typ != jArray {
		return
	}
	nodes, data := v.doc.nodes, v.doc.data
	j := v.i + 1
	for range v.node().n {
		m := &nodes[j]
		key := ""
		if typ == jObject {
			if m.flags&keyEscaped != 0 {
				key = unescape(data[m.key0:m.key1])
			} else {
				key = string(data[m.key0:m.key1])
			}
		}
		if !fn(key, Value{doc: v.doc, i: j}) {
			return
		}
		j = m.next
	}
}
