package guest

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"testing"
)

// sameAsJSON checks that v reads as encoding/json decodes the same text
// (numbers as json.Number): type, strings, numbers' text, members (the last
// of a repeated name counting) and elements.
func sameAsJSON(t *testing.T, path string, v Value, want any) {
	t.Helper()
	if !v.Exists() {
		t.Fatalf("%s: missing, encoding/json has %v", path, want)
	}
	switch w := want.(type) {
	case nil:
		if !v.IsNull() {
			t.Fatalf("%s: not null: %s", path, v.Raw())
		}
	case bool:
		if b, ok := v.Bool(); !ok || b != w {
			t.Fatalf("%s: Bool() = %v, %v; want %v", path, b, ok, w)
		}
	case string:
		if s, ok := v.String(); !ok || s != w {
			t.Fatalf("%s: String() = %q, %v; want %q", path, s, ok, w)
		}
	case json.Number:
		if string(v.Raw()) != string(w) {
			t.Fatalf("%s: number %s, want %s", path, v.Raw(), w)
		}
		f, ok := v.Float()
		wf, err := w.Float64()
		if ok != (err == nil) || ok && f != wf {
			t.Fatalf("%s: Float() = %v, %v; strconv says %v, %v", path, f, ok, wf, err)
		}
		if i, err := w.Int64(); err == nil {
			if got, ok := v.Int(); !ok || got != i {
				t.Fatalf("%s: Int() = %d, %v; want %d", path, got, ok, i)
			}
		}
	case []any:
		if !v.IsArray() || v.Len() != len(w) {
			t.Fatalf("%s: %s is no array of %d", path, v.Raw(), len(w))
		}
		i := 0
		v.Each(func(key string, e Value) bool {
			if key != "" {
				t.Fatalf("%s: element %d has the name %q", path, i, key)
			}
			sameAsJSON(t, path+"["+itoa(int64(i))+"]", e, w[i])
			if e != v.Index(i) {
				t.Fatalf("%s: Each and Index(%d) differ", path, i)
			}
			i++
			return true
		})
		if v.Index(len(w)).Exists() || v.Index(-1).Exists() {
			t.Fatalf("%s: an index out of range exists", path)
		}
	case map[string]any:
		if !v.IsObject() {
			t.Fatalf("%s: %s is no object", path, v.Raw())
		}
		keys := v.Keys()
		distinct := slices.Clone(keys)
		slices.Sort(distinct)
		if distinct = slices.Compact(distinct); len(distinct) != len(w) || len(keys) != v.Len() {
			t.Fatalf("%s: keys %q, encoding/json has %d", path, keys, len(w))
		}
		for k, e := range w {
			sameAsJSON(t, path+"."+k, v.Get(k), e)
		}
	default:
		t.Fatalf("%s: unexpected %T", path, want)
	}
}

// checkAgainstJSON parses data with the scanner and with encoding/json and
// compares what they make of it.
func checkAgainstJSON(t *testing.T, data []byte) {
	t.Helper()
	v := ParseValue(data)
	if v.Exists() != json.Valid(data) {
		t.Fatalf("%q: scanner says valid %v, encoding/json %v", data, v.Exists(), json.Valid(data))
	}
	if !v.Exists() {
		return
	}
	var want any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&want); err != nil {
		t.Fatalf("%q: encoding/json: %v", data, err)
	}
	sameAsJSON(t, "$", v, want)
}

func TestValueAgainstEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, ` { } `, `[ ]`, `null`, `true`, `false`, `0`, `-0`, `12`, `-3.25e+2`, `1E3`, `1e400`, `0.5`,
		`"plain"`, `""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"é中😀"`, `"\ud800"`, `"\udc00x"`,
		`"\ud800\u0041"`, `"\ud83d\ude00\ud83d"`, "\"\xff\xfe\"", "\"a\xc3\"",
		`{"a":1,"b":[true,false,null,{"c":"d"}],"e":{"f":{"g":[[],[{}]]}}}`,
		`{"a":1,"a":2}`, `{"a":{"x":1},"a":[2]}`, `{"k\u0065y":"v","key2":{"n\"q":3}}`,
		`[1,[2,[3,[4,[5]]]]]`, `{"spec":{"min":{"cpu":"2","memory":"4Gi"},"max":{"cpu":4}}}`,
		"\t\n\r {\"a\" : [ 1 , 2 ] }\n",
		// Malformed.
		``, ` `, `{`, `}`, `[`, `]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a":1 "b":2}`,
		`[1 2]`, `{1:2}`, `{'a':1}`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `NaN`, `tru`, `nul`, `falsey`,
		`"unterminated`, `"bad \x escape"`, `"\u12"`, `"\u12g4"`, "\"ctl\x01\"", `{} {}`, `[] x`, `"a"b`,
	} {
		checkAgainstJSON(t, []byte(s))
	}
	deep := bytes.Repeat([]byte("["), 100000)
	if ParseValue(deep).Exists() {
		t.Error("an unclosed deep array parsed")
	}
	deep = append(deep, bytes.Repeat([]byte("]"), 100000)...)
	v := ParseValue(deep)
	for range 99999 {
		v = v.Index(0)
	}
	if !v.IsArray() || v.Len() != 0 {
		t.Error("the innermost of 100000 nested arrays is not an empty array")
	}
}

func TestValueAccessors(t *testing.T) {
	v := ParseValue([]byte(`{"s":"x","i":-42,"f":2.5,"big":9223372036854775807,"over":9223372036854775808,
		"e":1e3,"t":true,"n":null,"a":[1,"two"],"o":{"k":"v"}}`))
	if s, ok := v.Get("s").String(); s != "x" || !ok {
		t.Errorf("s = %q, %v", s, ok)
	}
	if _, ok := v.Get("i").String(); ok {
		t.Error("a number read as a string")
	}
	if i, ok := v.Get("i").Int(); i != -42 || !ok {
		t.Errorf("i = %d, %v", i, ok)
	}
	if _, ok := v.Get("f").Int(); ok {
		t.Error("2.5 read as an integer")
	}
	if i, ok := v.Get("big").Int(); i != math.MaxInt64 || !ok {
		t.Errorf("big = %d, %v", i, ok)
	}
	if _, ok := v.Get("over").Int(); ok {
		t.Error("2^63 read as an int64")
	}
	if i, ok := v.Get("e").Int(); i != 1000 || !ok {
		t.Errorf("1e3 = %d, %v", i, ok)
	}
	if f, ok := v.Get("f").Float(); f != 2.5 || !ok {
		t.Errorf("f = %v, %v", f, ok)
	}
	if b, ok := v.Get("t").Bool(); !b || !ok {
		t.Errorf("t = %v, %v", b, ok)
	}
	if !v.Get("n").Exists() || !v.Get("n").IsNull() || v.Get("t").IsNull() {
		t.Error("null is not told apart")
	}
	if s, _ := v.Get("a").Index(1).String(); s != "two" || v.Get("a").Len() != 2 {
		t.Errorf("a[1] = %q, len %d", s, v.Get("a").Len())
	}
	if s, _ := v.Get("o", "k").String(); s != "v" {
		t.Errorf("o.k = %q", s)
	}
	for _, missing := range []Value{v.Get("nope"), v.Get("s", "x"), v.Get("a", "0"), v.Get("o", "k", "deeper"),
		v.Get("a").Index(2), v.Get("o").Index(0), Value{}.Get("x"), Value{}.Index(0)} {
		if missing.Exists() || missing.Len() != 0 || missing.Keys() != nil || missing.Raw() != nil {
			t.Errorf("a missing value exists: %s", missing.Raw())
		}
		if _, ok := missing.String(); ok {
			t.Error("a missing value reads as a string")
		}
	}
	if got := v.Get().Keys(); !slices.Equal(got, []string{"s", "i", "f", "big", "over", "e", "t", "n", "a", "o"}) {
		t.Errorf("keys %q, want them in the order of the text", got)
	}
	n := 0
	v.Each(func(string, Value) bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("Each went on after false: %d calls", n)
	}
	if string(v.Get("s").Raw()) != `"x"` || string(v.Get("a").Raw()) != `[1,"two"]` {
		t.Errorf("Raw: %s, %s", v.Get("s").Raw(), v.Get("a").Raw())
	}
}

// FuzzValue checks the scanner against encoding/json on any text: the same
// verdict on validity, and the same values read from a valid one.
func FuzzValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"\u00e9"}],"c":null}`, `[true,false,-0.5e-3]`, `"\ud83d\ude00"`, `{"a":1,"a":2}`, `{"a":}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstJSON(t, data)
	})
}
